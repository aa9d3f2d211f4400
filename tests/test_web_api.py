"""The web page's HTTP side, over real HTTP on loopback: login, refusal, headers, the JSON API.

A real `dsh-memory-mcp serve` process (tests/helpers/web_server.py) serves the page next to `/mcp`;
the test talks to it with httpx and checks the store files on disk. The browser side is tests/test_web_browser.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from dsh_memory_mcp.store.records import new_record
from dsh_memory_mcp.store.scopes import scope_file_relpath
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import subprocess_env
from tests.helpers.services import make_service
from tests.helpers.web_server import (
    WebServer,
    erase_all_but,
    inserted,
    new_code,
    on_disk,
    page_login,
    recover_dry_run,
    running_web,
    saved,
)

pytestmark = pytest.mark.slow

STATIC = Path(__file__).resolve().parent.parent / "src" / "dsh_memory_mcp" / "transports" / "web_static"
READS = [
    "/api/session",
    "/api/version",
    "/api/overview",
    "/api/memories",
    "/api/search?q=x",
    "/api/export",
    "/api/activity",
    "/api/duplicates",
    "/api/trash",
]
WRITES = [
    "/api/forget",
    "/api/import",
    "/api/memories",
    "/api/memories/00000000/edit",
    "/api/recover",
    "/api/duplicates/keep",
    "/api/trash/restore",
    "/api/trash/purge",
    "/api/login-code",
]
DAY = 86_400_000
CREDENTIAL = "X-DSH-Page-Credential"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    root = tmp_path_factory.mktemp("web-api")
    with running_web(root / "store", root) as srv:
        yield srv


@pytest.fixture(scope="module")
def credential(server: WebServer) -> dict[str, str]:
    return page_login(server.base, server.token)


@pytest.fixture
def client(server: WebServer, credential: dict[str, str]) -> Iterator[httpx.Client]:
    """A client logged in the way the page is: the page credential in its header, no cookie."""
    with httpx.Client(base_url=server.base, timeout=30, headers=credential) as c:
        yield c


def store_bytes(server: WebServer) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in server.store_dir.rglob("*.jsonl")}


def post(c: httpx.Client, path: str, body: object, **headers: str) -> httpx.Response:
    return c.post(path, content=json.dumps(body), headers={"Content-Type": "application/json", **headers})


# -- login: a one-time code in the fragment, a page credential in a header, never a cookie -----


def code_login(base: str, code: str, **headers: str) -> httpx.Response:
    """What the page's script does with a login link's code."""
    return httpx.post(
        base + "/api/login", json={"code": code}, headers={"Content-Type": "application/json", **headers}, timeout=30
    )


def test_serve_prints_a_one_time_login_link_and_never_the_token(tmp_path: Path):
    """Issue 32: the long-lived token never sits in a URL the browser keeps. The printed link holds a
    code that logs in once; the second use is refused with how to get a new link."""
    with running_web(tmp_path / "store", tmp_path) as srv:
        err = srv.stderr_text()
        assert srv.token not in err
        code = srv.printed_url.removeprefix(f"{srv.base}/#code=")
        assert code != srv.printed_url and srv.token not in code and len(code) >= 20
        first = code_login(srv.base, code, Origin=srv.base)
        assert first.status_code == 200, first.text
        assert "set-cookie" not in first.headers
        assert (
            httpx.get(srv.base + "/api/overview", headers={CREDENTIAL: first.json()["credential"]}).status_code == 200
        )
        again = code_login(srv.base, code)
        english = code_login(srv.base, code, **{"Accept-Language": "en"})
    assert again.status_code == 401 and "credential" not in again.text
    assert again.json()["code"] == "LOGIN_CODE_INVALID"
    assert "只能用一次" in again.json()["message"] and "dsh-memory-mcp web" in again.json()["message"]
    assert "works once" in english.json()["message"]


def test_dsh_memory_mcp_web_prints_a_fresh_link_that_logs_in_once(tmp_path: Path):
    """The way back in when serve runs as a service and its stderr is out of sight: the CLI finds serve
    by serve.json (its kept token, no DSH_MEMORY_TOKEN), asks it for a code, prints the link."""
    store = tmp_path / "store"

    def web() -> subprocess.CompletedProcess[str]:
        env = subprocess_env(DSH_MEMORY_VECTOR="off", XDG_STATE_HOME=str(tmp_path / "xdg-state"))
        return subprocess.run(
            [sys.executable, "-m", "dsh_memory_mcp", "web", "--store-dir", str(store)],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=env,
            timeout=60,
        )

    with running_web(store, tmp_path, kept_token=True) as srv:
        first, second = web(), web()
        assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
        links = [first.stdout.strip(), second.stdout.strip()]
        assert all(link.startswith(f"{srv.base}/#code=") for link in links) and links[0] != links[1]
        assert srv.token not in first.stdout + first.stderr
        assert "只能用一次" in first.stderr
        codes = [link.rsplit("#code=", 1)[1] for link in links]
        assert code_login(srv.base, codes[1]).status_code == 200  # each link on its own
        assert code_login(srv.base, codes[0]).status_code == 200
        assert code_login(srv.base, codes[0]).status_code == 401
    gone = web()  # serve stopped: said so, how to start it, nothing on stdout
    assert gone.returncode == 1 and gone.stdout == ""
    assert "没有正在运行的 serve" in gone.stderr and "serve --store-dir" in gone.stderr


def test_a_login_code_works_only_within_its_lifetime(tmp_path: Path):
    """Ten minutes on serve's clock (moved by hand, no sleeping): at 599 s a code logs in, at 600 s not."""
    from mcp.server.transport_security import TransportSecurityMiddleware

    from dsh_memory_mcp import config
    from dsh_memory_mcp.transports import access, web
    from dsh_memory_mcp.transports import http as serve_http

    now = [1_800_000_000_000]
    service = make_service(tmp_path / "store", tmp_path)
    service.clock = lambda: now[0]
    token, port = "t" * 43, 7799
    settings = config.resolve_serve_settings(port=port)
    security = TransportSecurityMiddleware(serve_http.security_settings(settings, port, user_token=True))
    checks = serve_http.PageChecks(security, settings, access.LoginCodes(service.clock))
    routes = web.web_routes(service, token, checks=checks)
    app, _ = serve_http.build_app(service, checks, token=token, extra_routes=routes)
    bearer = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    async def scenario() -> list[int]:
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url=f"http://127.0.0.1:{port}") as c:
            statuses = []
            for wait in (599, 600, 3600):
                code = (await c.post("/api/login-code", content="{}", headers=bearer)).json()["code"]
                now[0] += wait * 1000
                answer = await c.post("/api/login", json={"code": code})
                statuses.append(answer.status_code)
            return statuses

    try:
        assert anyio.run(scenario) == [200, 401, 401]
    finally:
        service.store.close()


def test_a_login_code_is_asked_for_with_the_token_only(server: WebServer, credential: dict[str, str]):
    """The page credential cannot mint codes (a login would outlive its expiry), nor can a stranger."""
    for headers in (credential, {"Authorization": "Bearer not-the-token"}, {}):
        r = httpx.post(
            server.base + "/api/login-code", content="{}", headers={"Content-Type": "application/json", **headers}
        )
        assert r.status_code == 401 and r.json() == {
            "ok": False,
            "code": "UNAUTHORIZED",
            "message": r.json()["message"],
        }
    foreign = httpx.post(
        server.base + "/api/login-code",
        content="{}",
        headers={
            "Authorization": f"Bearer {server.token}",
            "Content-Type": "application/json",
            "Origin": "http://evil.example",
        },
    )
    assert foreign.status_code == 403
    assert code_login(server.base, new_code(server.base, server.token)).status_code == 200


def test_the_login_exchange_gives_a_credential_that_is_not_the_token_and_sets_no_cookie(server: WebServer):
    r = httpx.post(
        server.base + "/api/login",
        content="{}",
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert "set-cookie" not in r.headers
    assert body["header"] == CREDENTIAL
    assert server.token not in body["credential"]
    assert body["expiresAt"] > int(time.time() * 1000)
    ok = httpx.get(server.base + "/api/overview", headers={CREDENTIAL: body["credential"]})
    assert ok.status_code == 200 and ok.json()["ok"] is True


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"Authorization": "Bearer not-the-token"}, id="wrong-token"),
        pytest.param({}, id="nothing"),
        pytest.param("credential", id="a-credential-cannot-renew-itself"),
        pytest.param("made-up-code", id="a-made-up-code"),
    ],
)
def test_the_login_exchange_needs_the_token_itself(server: WebServer, credential: dict[str, str], headers):
    sent = credential if headers == "credential" else {} if headers == "made-up-code" else headers
    body = json.dumps({"code": "x" * 24}) if headers == "made-up-code" else "{}"
    r = httpx.post(server.base + "/api/login", content=body, headers={"Content-Type": "application/json", **sent})
    assert r.status_code == 401
    assert "credential" not in r.json()


def test_a_page_credential_is_no_bearer_token_for_mcp_or_health(server: WebServer, credential: dict[str, str]):
    value = credential[CREDENTIAL]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for auth in ({"Authorization": f"Bearer {value}"}, credential):
        assert httpx.post(server.base + "/mcp", json=init, headers={**headers, **auth}).status_code == 401
        assert httpx.get(server.base + "/health", headers=auth).status_code == 401


@pytest.mark.parametrize("part", ["expiry", "nonce", "mac"])
def test_a_credential_with_any_part_changed_is_refused(server: WebServer, credential: dict[str, str], part: str):
    expiry, nonce, mac = credential[CREDENTIAL].split(".")
    if part == "expiry":
        expiry = str(int(expiry) + 365 * DAY)
    elif part == "nonce":
        nonce = nonce[::-1] + "x"
    else:
        mac = ("0" if mac[0] != "0" else "1") + mac[1:]
    forged = f"{expiry}.{nonce}.{mac}"
    assert httpx.get(server.base + "/api/overview", headers={CREDENTIAL: forged}).status_code == 401


def test_the_old_login_cookie_opens_nothing_and_the_page_clears_it(server: WebServer):
    """Earlier versions logged in with a cookie every port of the host received; it is worthless now."""
    name = f"dsh_memory_session_{server.port}"
    old_value = hmac.new(server.token.encode(), b"dsh-memory-mcp web session", hashlib.sha256).hexdigest()
    with httpx.Client(base_url=server.base, cookies={name: old_value}) as c:
        assert c.get("/api/overview").status_code == 401
        page = c.get("/")
    assert page.status_code == 200
    cleared = page.headers["set-cookie"]
    assert cleared.startswith(f"{name}=") and "max-age=0" in cleared.lower()


def test_an_old_query_login_url_is_never_turned_into_another_url_holding_the_token(server: WebServer):
    """Earlier versions redirected ``/?token=…`` to ``/#token=…``: the token in a second URL of ours."""
    r = httpx.get(f"{server.base}/?token={server.token}")
    assert r.status_code == 200 and "location" not in r.headers and "set-cookie" not in r.headers
    assert server.token not in r.text


def test_a_page_credential_expires(tmp_path: Path):
    # 2.5 s: ample for the first request right after the login, and less to wait for the expiry.
    with running_web(tmp_path / "store", tmp_path, DSH_MEMORY_WEB_LOGIN_SECS="2.5") as srv:
        login = page_login(srv.base, srv.token)
        expiry = int(login[CREDENTIAL].split(".")[0])
        accepted_at = refused_at = None
        deadline = time.monotonic() + 40
        while refused_at is None and time.monotonic() < deadline:
            asked = int(time.time() * 1000)
            status = httpx.get(srv.base + "/api/version", headers=login, timeout=10).status_code
            if status == 200 and accepted_at is None:
                accepted_at = asked
            elif status == 401:
                refused_at = int(time.time() * 1000)
            else:
                time.sleep(0.2)
        bearer = httpx.get(srv.base + "/api/version", headers={"Authorization": f"Bearer {srv.token}"}, timeout=10)
    assert accepted_at is not None and accepted_at < expiry, "the fresh credential was never accepted"
    assert refused_at is not None, "the credential was still accepted 40 s after it was issued"
    assert refused_at >= expiry  # refused only once its time was up
    assert bearer.status_code == 200  # the token itself still works


def test_a_new_token_revokes_every_credential_and_so_does_a_restart_with_the_same_token(tmp_path: Path):
    store = tmp_path / "store"
    with running_web(store, tmp_path, token="token-one-" + "x" * 24) as first:
        login = page_login(first.base, first.token)
        assert httpx.get(first.base + "/api/overview", headers=login).status_code == 200
        port = first.port
    with running_web(store, tmp_path, token="token-two-" + "y" * 24, port=port) as rotated:
        assert httpx.get(rotated.base + "/api/overview", headers=login).status_code == 401
    with running_web(store, tmp_path, token="token-one-" + "x" * 24, port=port) as same:
        # A credential dies with the serve process that issued it (issue 32), even under the same token.
        assert httpx.get(same.base + "/api/overview", headers=login).status_code == 401
        assert httpx.get(same.base + "/api/overview", headers=page_login(same.base, same.token)).status_code == 200


def test_serve_new_token_revokes_page_logins_and_so_does_a_plain_restart(tmp_path: Path):
    store = tmp_path / "store"
    with running_web(store, tmp_path, kept_token=True) as first:
        login = page_login(first.base, first.token)
        port = first.port
    with running_web(store, tmp_path, kept_token=True, port=port) as again:
        assert again.token == first.token  # serve kept its token over the restart
        assert httpx.get(again.base + "/api/overview", headers=login).status_code == 401  # not the process
    with running_web(store, tmp_path, "--new-token", kept_token=True, port=port) as rotated:
        assert rotated.token != first.token
        assert httpx.get(rotated.base + "/api/overview", headers=login).status_code == 401
        assert (
            httpx.get(rotated.base + "/api/overview", headers=page_login(rotated.base, rotated.token)).status_code
            == 200
        )


# -- the SDK's Host and Origin checks, as on /mcp -----------------------------------------------


@pytest.mark.parametrize("host", ["rebind.example", "rebind.example:80", "127.0.0.10", "evil.localhost"])
def test_a_host_outside_the_allow_list_gets_421_on_the_page_and_its_api_even_with_the_token(
    server: WebServer, host: str
):
    """DNS rebinding: a foreign name that resolves to loopback reaches the socket, not the page."""
    auth = {"Authorization": f"Bearer {server.token}", "Host": host}
    for method, path in [("GET", "/"), ("GET", "/api/overview"), ("POST", "/api/login"), ("GET", "/static/app.js")]:
        r = httpx.request(
            method, server.base + path, headers={**auth, "Content-Type": "application/json"}, content="{}"
        )
        assert r.status_code == 421, (path, r.status_code)
        assert r.json()["code"] == "HOST_REFUSED"
        assert "credential" not in r.text


def test_loopback_names_with_serves_port_are_answered(server: WebServer):
    auth = {"Authorization": f"Bearer {server.token}"}
    for name in ("127.0.0.1", "localhost"):
        r = httpx.get(server.base + "/api/overview", headers={**auth, "Host": f"{name}:{server.port}"})
        assert r.status_code == 200, name


def test_a_foreign_origin_is_refused_on_reads_too(server: WebServer, credential: dict[str, str]):
    r = httpx.get(server.base + "/api/memories", headers={**credential, "Origin": "http://127.0.0.1:1"})
    assert r.status_code == 403 and r.json()["code"] == "ORIGIN_REFUSED"
    own = httpx.get(server.base + "/api/memories", headers={**credential, "Origin": server.base})
    assert own.status_code == 200


# -- refusal, headers --------------------------------------------------------------------------


@pytest.mark.parametrize("path", READS)
def test_every_read_without_the_credential_or_the_bearer_token_is_401(server: WebServer, path: str):
    saved(server, "global", "只有登录的人能看到这条")
    r = httpx.get(server.base + path)
    assert r.status_code == 401
    assert r.json()["code"] == "UNAUTHORIZED"
    assert "只有登录的人" not in r.text


@pytest.mark.parametrize("path", WRITES)
def test_every_write_without_the_credential_or_the_bearer_token_is_401(server: WebServer, path: str):
    before = store_bytes(server)
    r = httpx.post(server.base + path, content='{"content": "x"}', headers={"Content-Type": "application/json"})
    assert r.status_code == 401
    assert store_bytes(server) == before


def test_the_page_itself_is_served_without_login_but_carries_no_data(server: WebServer):
    saved(server, "global", "页面 HTML 里不该有这条")
    r = httpx.get(server.base + "/")
    assert r.status_code == 200
    assert "页面 HTML 里不该有这条" not in r.text
    assert '<script src="/static/app.js"' in r.text


def test_the_bearer_token_works_instead_of_the_credential_and_a_wrong_one_does_not(server: WebServer):
    ok = httpx.get(server.base + "/api/overview", headers={"Authorization": f"Bearer {server.token}"})
    bad = httpx.get(server.base + "/api/overview", headers={"Authorization": "Bearer nope"})
    assert ok.status_code == 200 and ok.json()["ok"] is True
    assert bad.status_code == 401


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        pytest.param({"Origin": "http://evil.example"}, "ORIGIN_REFUSED", id="foreign-origin"),
        pytest.param({"Origin": "null"}, "ORIGIN_REFUSED", id="null-origin"),
        pytest.param({"Sec-Fetch-Site": "cross-site"}, "CROSS_SITE", id="sec-fetch-site"),
        pytest.param({"Content-Type": "text/plain"}, "CONTENT_TYPE", id="simple-content-type"),
        pytest.param({"Content-Type": "application/x-www-form-urlencoded"}, "CONTENT_TYPE", id="form"),
    ],
)
def test_a_cross_site_or_simple_post_is_refused_and_deletes_nothing(
    server: WebServer, client: httpx.Client, headers: dict[str, str], code: str
):
    ident = saved(server, "global", f"跨站请求删不掉我 {code} {sorted(headers)}")
    r = post(client, "/api/forget", {"ids": [ident]}, **headers)
    assert r.status_code == 403
    assert r.json()["code"] == code
    assert ident in on_disk(server)


def test_a_post_from_the_pages_own_origin_is_accepted(server: WebServer, client: httpx.Client):
    ident = saved(server, "global", "同源请求可以删除我")
    r = post(client, "/api/forget", {"ids": [ident]}, Origin=server.base, **{"Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 200, r.text
    assert r.json()["ids"] == [ident]
    assert ident not in on_disk(server)


def test_every_answer_carries_the_csp_nosniff_and_no_referrer(server: WebServer, client: httpx.Client):
    for path in ["/", "/static/app.js", "/static/i18n.js", "/static/app.css", "/api/overview"]:
        r = client.get(path)
        csp = r.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/../web.py").status_code == 404


def test_the_page_has_no_inline_script_or_style_and_the_scripts_never_use_innerhtml(server: WebServer):
    page = httpx.get(server.base + "/").text
    assert "<script>" not in page and "<style" not in page and " style=" not in page and "onclick=" not in page
    for name in ("app.js", "i18n.js"):
        script = httpx.get(f"{server.base}/static/{name}").text
        assert "innerHTML" not in script.replace("never through innerHTML", "")
        assert "insertAdjacentHTML" not in script and "document.write" not in script and "eval(" not in script
        assert "outerHTML" not in script and 'setAttribute("style"' not in script


def test_every_text_key_the_page_uses_exists_in_both_languages():
    script = (STATIC / "app.js").read_text(encoding="utf-8")
    texts = (STATIC / "i18n.js").read_text(encoding="utf-8")
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    zh_part, en_part = texts.split("\n  en: {")
    zh = set(re.findall(r'^\s+"([\w.]+)":', zh_part, re.M))
    en = set(re.findall(r'^\s+"([\w.]+)":', en_part, re.M))
    used = set(re.findall(r'"([a-z]+\.[A-Za-z]+)"', script))
    used |= {f"kind.{k}" for k in ("fact", "decision", "preference", "procedure", "note", "rule")}
    used |= {f"sort.{k}" for k in ("updated", "oldest", "importance", "access")}
    static = set(re.findall(r'data-i18n(?:-[a-z-]+)?="([\w.]+)"', page))
    assert used - zh == set(), "keys the script uses that have no Chinese text"
    assert zh - en == set(), "Chinese texts without an English one"
    assert static - en == set(), "static texts without an English one"
    assert en - zh - static == set(), "English texts nothing uses"
    assert {k for k in zh if k.startswith("code.")} == {k for k in en if k.startswith("code.")}


def test_an_oversized_body_is_refused_with_413_before_anything_is_read(server: WebServer, client: httpx.Client):
    r = post(client, "/api/forget", {"ids": ["x" * (2 << 20)]})
    assert r.status_code == 413
    assert r.json()["code"] == "BODY_TOO_LARGE"


# -- a new memory --------------------------------------------------------------------------------


def test_a_new_memory_from_the_page_is_a_memory_save_with_client_web(server: WebServer, client: httpx.Client):
    body = {
        "content": "用户喜欢深色主题",
        "kind": "preference",
        "tags": ["界面"],
        "scope": "web-new",
        "importance": "0.7",
    }
    r = post(client, "/api/memories", body)
    assert r.status_code == 200, r.text
    answer = r.json()
    records = on_disk(server, "web-new")
    new = records[answer["id"]]
    assert (new["content"], new["kind"], new["tags"], new["importance"]) == (
        "用户喜欢深色主题",
        "preference",
        ["界面"],
        0.7,
    )
    assert new["source"] == {"origin": "explicit", "client": "web"}
    assert answer["record"]["id"] == answer["id"] and answer["record"]["client"]["key"] == "web"
    again = post(client, "/api/memories", body).json()
    assert again["deduped"] is True and again["id"] == answer["id"]
    assert len(on_disk(server, "web-new")) == 1


@pytest.mark.parametrize(
    ("change", "code"),
    [
        pytest.param({"content": "  "}, "CONTENT_EMPTY", id="empty"),
        pytest.param({"content": "长" * 20_001}, "CONTENT_TOO_LONG", id="too-long"),
        pytest.param({"content": "部署用 ghp_" + "Zx81Qw0aB7" * 4}, "CONTENT_SECRET", id="secret"),
        pytest.param({"importance": "很重要"}, "IMPORTANCE_RANGE", id="importance-text"),
        pytest.param({"importance": 7}, "IMPORTANCE_RANGE", id="importance-range"),
        pytest.param({"kind": "opinion"}, "KIND_INVALID", id="kind"),
        pytest.param({"tags": ["x" * 65]}, "TAGS_INVALID", id="tags"),
        pytest.param({"scope": "all"}, "SCOPE_NOT_WRITABLE", id="scope-all"),
        pytest.param({"scope": "a/b"}, "SCOPE_INVALID", id="scope-name"),
    ],
)
def test_a_bad_new_memory_gets_memory_saves_code_and_writes_nothing(
    server: WebServer, client: httpx.Client, change: dict, code: str
):
    before = store_bytes(server)
    r = post(
        client, "/api/memories", {"content": "一条新记忆", "kind": "note", "tags": [], "scope": "web-bad", **change}
    )
    assert r.status_code == 400, r.text
    assert r.json()["ok"] is False and r.json()["code"] == code
    assert store_bytes(server) == before


# -- edit, forget, search, list (the tools underneath) -------------------------------------------


def test_an_edit_is_a_supersede_new_id_on_disk_old_record_expired(server: WebServer, client: httpx.Client):
    old = saved(server, "global", "编辑前的内容", kind="note", tags=["旧"])
    r = post(client, f"/api/memories/{old}/edit", {"content": "编辑后的内容", "kind": "rule", "tags": ["新"]})
    assert r.status_code == 200, r.text
    body = r.json()
    new = body["id"]
    assert new != old and body["superseded"] == old
    records = on_disk(server)
    assert records[old]["expiredAt"] <= int(time.time() * 1000)
    assert records[new]["content"] == "编辑后的内容"
    assert (records[new]["kind"], records[new]["tags"], records[new]["supersedes"]) == ("rule", ["新"], old)


def test_an_edit_of_tags_only_still_makes_a_new_record(server: WebServer, client: httpx.Client):
    old = saved(server, "global", "只改标签的记忆", tags=["a"])
    r = post(client, f"/api/memories/{old}/edit", {"content": "只改标签的记忆", "kind": "note", "tags": ["b"]})
    assert r.status_code == 200, r.text
    records = on_disk(server)
    assert "expiredAt" in records[old]
    assert records[r.json()["id"]]["tags"] == ["b"]


@pytest.mark.parametrize(
    ("change", "code"),
    [
        pytest.param({"content": "   "}, "CONTENT_EMPTY", id="empty"),
        pytest.param({"importance": "很重要"}, "IMPORTANCE_RANGE", id="importance-text"),
        pytest.param({"importance": 7}, "IMPORTANCE_RANGE", id="importance-range"),
        pytest.param({"kind": "opinion"}, "KIND_INVALID", id="kind"),
    ],
)
def test_a_bad_edit_gets_the_tools_coded_error_and_changes_nothing(
    server: WebServer, client: httpx.Client, change: dict, code: str
):
    old = saved(server, "global", f"不会被坏编辑改动 {code}")
    before = (server.store_dir / "global.jsonl").read_bytes()
    r = post(client, f"/api/memories/{old}/edit", {"content": "新内容", "kind": "note", "tags": [], **change})
    assert r.status_code == 400
    assert r.json()["ok"] is False and r.json()["code"] == code
    assert (server.store_dir / "global.jsonl").read_bytes() == before


def test_editing_a_memory_that_is_gone_is_a_409_not_a_new_memory(server: WebServer, client: httpx.Client):
    old = saved(server, "global", "马上被别处删除")
    assert post(client, "/api/forget", {"ids": [old]}).status_code == 200
    before = (server.store_dir / "global.jsonl").read_bytes()
    r = post(client, f"/api/memories/{old}/edit", {"content": "复活?", "kind": "note", "tags": []})
    assert r.status_code == 409 and r.json()["code"] == "GONE"
    assert (server.store_dir / "global.jsonl").read_bytes() == before


def test_duplicates_lists_the_near_identical_groups_and_keep_replaces_the_others_through_a_supersede(
    server: WebServer, client: httpx.Client
):
    scope = "web-api-dups"
    kept = saved(server, scope, "Deploys go out on Tuesdays after the standup meeting")
    other = saved(server, scope, "deploys go out on tuesdays, after the standup meeting!")
    loner = saved(server, scope, "部署在每周二站会之后进行")  # the same fact in Chinese: not grouped lexically
    r = client.get("/api/duplicates", params={"scope": scope})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["total"] == 1 and body["byMeaning"] is False  # vectors off: compared by words only
    [group] = body["groups"]
    assert group["scope"] == scope and group["why"] == "lexical"
    assert {c["id"] for c in group["records"]} == {kept, other}
    assert all("createdAt" in c and "accessCount" in c and c["client"]["key"] for c in group["records"])
    # Keeping one with another scope's id, itself, or a bad body: refused, nothing written.
    elsewhere = saved(server, "global", "Deploys go out on Tuesdays after the standup meeting")
    before = store_bytes(server)
    for payload, status, code in [
        ({"keep": kept, "replace": [elsewhere]}, 400, "IDS_INVALID"),
        ({"keep": kept, "replace": [kept]}, 400, "IDS_INVALID"),
        ({"keep": kept, "replace": "nope"}, 400, "IDS_EMPTY"),
        ({"keep": kept, "replace": ["0000000000"]}, 409, "GONE"),
    ]:
        refused = post(client, "/api/duplicates/keep", payload)
        assert (refused.status_code, refused.json()["code"]) == (status, code), payload
    assert store_bytes(server) == before
    r = post(client, "/api/duplicates/keep", {"keep": kept, "replace": [other]})
    assert r.status_code == 200, r.text
    new = r.json()["id"]
    assert r.json()["replaced"] == [other] and "取代" in r.json()["message"]
    records = on_disk(server, scope)
    assert (records[new]["supersedes"], records[new]["merged"]) == (kept, [other])
    assert "expiredAt" in records[kept] and "expiredAt" in records[other] and "expiredAt" not in records[loner]
    assert client.get("/api/duplicates", params={"scope": scope}).json()["groups"] == []
    versions = client.get(f"/api/memories/{new}/versions").json()["versions"]
    assert [v["id"] for v in versions] == [new, other, kept]


def test_a_search_from_the_page_finds_chinese_and_does_not_count_as_an_access(tmp_path: Path):
    from tests.helpers.serve_proc import Serve, call_tool, initialize

    with running_web(tmp_path / "store", tmp_path) as srv:
        ident = saved(srv, "global", "网页检索不应增加访问次数:向量检索的阈值")
        other = saved(srv, "global", "工具检索算一次访问:部署流水线")
        with httpx.Client(base_url=srv.base, timeout=30, headers=page_login(srv.base, srv.token)) as client:
            r = client.get("/api/search", params={"q": "阈值", "scope": "all"})
        assert r.status_code == 200
        hits = r.json()["records"]
        assert hits[0]["id"] == ident and hits[0]["score"] > 0
        assert hits[0]["accessCount"] == 0 and hits[0]["source"] == {"origin": "explicit"}
        assert hits[0]["client"] == {"key": "-", "name": None, "full": None}
        # The control: a tool's search on the same serve does count (pending counts are written at exit).
        mcp = Serve(srv.proc, srv.store_dir, srv.stderr, {"url": srv.base + "/mcp", "token": srv.token})
        with httpx.Client(timeout=30) as http:
            found = call_tool(mcp, http, initialize(mcp, http), "memory_search", {"query": "部署流水线"})
        assert [r["id"] for r in found["structuredContent"]["records"]] == [other]
    # serve has exited, so every access it counted is on disk now.
    assert {i: r["accessCount"] for i, r in on_disk(srv).items()} == {ident: 0, other: 1}


def test_the_pages_search_ranks_exactly_as_memory_search_and_marks_the_querys_terms(
    server: WebServer, client: httpx.Client
):
    scope = "web-rank"
    for i in range(25):
        saved(server, scope, f"第 {i} 条:数据库迁移脚本" + (" 迁移前先备份" * (i % 4)) + (" 无关内容" * (i % 3)))
    from dsh_memory_mcp.config import resolve_settings
    from dsh_memory_mcp.service.compose import close_service, open_service

    service = open_service(resolve_settings(store_dir=str(server.store_dir), env={"DSH_MEMORY_VECTOR": "off"}))
    try:
        tool = service.call("memory_search", {"query": "数据库迁移", "scope": scope, "topK": 20}).structured
    finally:
        close_service(service)
    page = client.get("/api/memories", params={"q": "数据库迁移", "scope": scope, "limit": 20}).json()
    assert [r["id"] for r in page["records"]] == [r["id"] for r in tool["records"]]
    assert page["total"] == 25
    rest = client.get("/api/memories", params={"q": "数据库迁移", "scope": scope, "offset": 20, "limit": 20}).json()
    assert len(rest["records"]) == 5 and not {r["id"] for r in rest["records"]} & {r["id"] for r in page["records"]}
    assert {"数据", "库迁", "迁移"} <= set(page["terms"])


def test_a_page_delete_goes_to_the_trash_restores_and_purges_under_the_same_checks(
    server: WebServer, client: httpx.Client
):
    scope = "web-trash-api"
    ident = saved(server, scope, "回收站接口测试")
    r = post(client, "/api/forget", {"ids": [ident]})
    assert r.status_code == 200 and r.json()["trashDays"] == 30 and r.json()["ids"] == [ident]
    listed = client.get("/api/trash").json()
    assert listed["days"] == 30 and ident in {e["id"] for e in listed["entries"]}
    refused = post(client, "/api/trash/purge", {"all": True}, Origin="http://127.0.0.1:1")
    assert refused.status_code == 403 and ident in {e["id"] for e in client.get("/api/trash").json()["entries"]}
    back = post(client, "/api/trash/restore", {"ids": [ident[:8]]}).json()
    [row] = back["restored"]
    assert row["id"] == ident and row["deduped"] is False and row["scope"] == scope
    assert [r["content"] for r in on_disk(server, scope).values()] == ["回收站接口测试"]
    gone = post(client, "/api/forget", {"ids": [row["restoredAs"]], "purge": True}).json()
    assert "trashDays" not in gone and on_disk(server, scope) == {}
    assert row["restoredAs"] not in {e["id"] for e in client.get("/api/trash").json()["entries"]}
    assert post(client, "/api/trash/purge", {"ids": []}).json()["code"] == "IDS_EMPTY"


def test_forgetting_a_selection_removes_exactly_those_ids(server: WebServer, client: httpx.Client):
    scope = "web-forget-many"
    ids = [saved(server, scope, f"批量删除候选 {i}") for i in range(4)]
    r = post(client, "/api/forget", {"ids": ids[:3]})
    assert r.status_code == 200 and r.json()["deleted"] == 3
    assert set(on_disk(server, scope)) == {ids[3]}


# -- browsing: filters, sorts, paging --------------------------------------------------------------

#: A fixed day (UTC midnight, 2025-10-10) so dates in these tests do not depend on the clock.
BASE = 1_760_054_400_000
CLIENTS = ["claude-code/1.0.3", "cursor/2.1", None, "web"]


def _seed(i: int) -> dict:
    return {
        "content": f"浏览测试第 {i} 条",
        "kind": ["fact", "rule", "note"][i % 3],
        "tags": [["alpha"], ["beta", "Alpha"], []][i % 3],
        "client": CLIENTS[i % 4],
        "at": BASE + i * DAY + 5 * 3_600_000,  # day i at 05:00 UTC
        "importance": None if i % 5 == 0 else (i % 7) / 10,
        "access": (i * 7) % 11,
    }


@pytest.fixture(scope="module")
def browse_scope(server: WebServer) -> tuple[str, dict[str, dict]]:
    """14 records in one scope with known kinds, tags, clients, days, importance and access counts."""
    scope = "web-browse"
    seeds: dict[str, dict] = {}
    records = []
    for i in range(14):
        seed = _seed(i)
        source = {"origin": "explicit", **({"client": seed["client"]} if seed["client"] else {})}
        rec = new_record(
            scope=scope,
            content=seed["content"],
            kind=seed["kind"],
            tags=seed["tags"],
            importance=seed["importance"],
            source=source,
            now=seed["at"],
        ).with_changes(accessCount=seed["access"])
        seeds[rec.id] = seed
        records.append(rec)
    inserted(server, scope, records)
    return scope, seeds


def _ids(http: httpx.Client, **params) -> list[str]:
    r = http.get("/api/memories", params=params)
    assert r.status_code == 200, r.text
    return [x["id"] for x in r.json()["records"]]


def _date(day: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime((BASE + day * DAY) / 1000))


@pytest.mark.parametrize(
    ("params", "keep"),
    [
        pytest.param({"tag": "alpha"}, lambda s: "alpha" in [t.lower() for t in s["tags"]], id="tag-any-case"),
        pytest.param({"tag": "beta"}, lambda s: "beta" in s["tags"], id="tag"),
        pytest.param({"client": "claude-code"}, lambda s: s["client"] == "claude-code/1.0.3", id="client"),
        pytest.param({"client": "-"}, lambda s: s["client"] is None, id="client-by-hand"),
        pytest.param({"client": "web"}, lambda s: s["client"] == "web", id="client-web"),
        pytest.param({"from": _date(3), "to": _date(6)}, lambda s: 3 <= (s["at"] - BASE) // DAY <= 6, id="dates"),
        pytest.param({"from": _date(12)}, lambda s: (s["at"] - BASE) // DAY >= 12, id="from-only"),
        pytest.param({"to": _date(1)}, lambda s: (s["at"] - BASE) // DAY <= 1, id="to-only"),
        pytest.param({"kind": "rule", "tag": "alpha"}, lambda s: s["kind"] == "rule" and s["tags"], id="kind-and-tag"),
    ],
)
def test_each_filter_keeps_exactly_the_matching_memories(client, browse_scope, params, keep):
    scope, seeds = browse_scope
    expected = {ident for ident, seed in seeds.items() if keep(seed)}
    assert expected and expected != set(seeds)  # the filter really filters
    assert set(_ids(client, scope=scope, tz=0, **params)) == expected


def test_a_date_range_is_the_callers_local_days(client, browse_scope):
    """05:00 UTC is 13:00 in UTC+8 (same day) and 22:00 the day before in UTC-7."""
    scope, seeds = browse_scope
    day4 = {i for i, s in seeds.items() if (s["at"] - BASE) // DAY == 4}
    day5 = {i for i, s in seeds.items() if (s["at"] - BASE) // DAY == 5}
    assert set(_ids(client, scope=scope, tz=480, **{"from": _date(4), "to": _date(4)})) == day4
    assert set(_ids(client, scope=scope, tz=-420, **{"from": _date(4), "to": _date(4)})) == day5


@pytest.mark.parametrize(
    ("sort", "key"),
    [
        pytest.param("updated", lambda s: -s["at"], id="newest"),
        pytest.param("oldest", lambda s: s["at"], id="oldest"),
        pytest.param(
            "importance",
            lambda s: (-(s["importance"] if s["importance"] is not None else -1), -s["at"]),
            id="importance",
        ),
        pytest.param("access", lambda s: (-s["access"], -s["at"]), id="access"),
    ],
)
def test_each_sort_orders_as_a_person_expects(client, browse_scope, sort, key):
    scope, seeds = browse_scope
    expected = [ident for ident, _ in sorted(seeds.items(), key=lambda kv: key(kv[1]))]
    assert _ids(client, scope=scope, sort=sort) == expected


def test_an_unknown_sort_or_date_is_a_coded_400(client, browse_scope):
    scope, _ = browse_scope
    assert client.get("/api/memories", params={"scope": scope, "sort": "random"}).json()["code"] == "SORT_INVALID"
    assert client.get("/api/memories", params={"scope": scope, "from": "yesterday"}).json()["code"] == "DATE_INVALID"
    assert client.get("/api/memories", params={"scope": scope, "limit": "lots"}).status_code == 400


def test_paging_walks_past_200_without_gaps_or_repeats(server: WebServer, client: httpx.Client):
    scope = "web-paging"
    inserted(server, scope, [new_record(scope=scope, content=f"分页 {i}", now=BASE + i * 60_000) for i in range(230)])
    pages = [
        client.get("/api/memories", params={"scope": scope, "offset": o, "limit": 100}).json() for o in (0, 100, 200)
    ]
    assert [len(p["records"]) for p in pages] == [100, 100, 30]
    assert {p["total"] for p in pages} == {230}
    contents = [r["content"] for p in pages for r in p["records"]]
    assert contents == [f"分页 {i}" for i in reversed(range(230))]


def test_the_activity_counts_match_the_scope_file(server: WebServer, client: httpx.Client):
    """Per-day counts by client, computed here from the JSONL lines, not by the code under test."""
    scope = "web-activity"
    now = int(time.time() * 1000)
    clients = ["claude-code/1.2", "cursor/0.4", None]
    recs = []
    for i, back in enumerate([0, 0, 1, 3, 3, 3, 10, 29, 30, 45]):
        client_name = clients[i % 3]
        source = {"origin": "explicit", **({"client": client_name} if client_name else {})}
        recs.append(
            new_record(
                scope=scope, content=f"活动 {i}", kind=["fact", "rule"][i % 2], source=source, now=now - back * DAY
            )
        )
    old = new_record(scope=scope, content="被取代的不算", now=now).with_changes(expiredAt=now - 5)
    inserted(server, scope, [*recs, old])
    tz = 480
    answer = client.get("/api/activity", params={"scope": scope, "tz": tz}).json()
    [row] = answer["activity"]
    asked = int(time.time() * 1000)

    expected: dict[tuple[str, str], int] = {}
    kinds: dict[str, int] = {}
    lines = (server.store_dir / scope_file_relpath(scope)).read_text(encoding="utf-8").splitlines()
    today = (asked + tz * 60_000) // DAY
    for line in lines:
        data = json.loads(line)
        if "expiredAt" in data and data["expiredAt"] < asked:
            continue
        kinds[data["kind"]] = kinds.get(data["kind"], 0) + 1
        day = (data["updatedAt"] + tz * 60_000) // DAY
        if today - 29 <= day <= today:
            who = (data.get("source", {}).get("client") or "").split("/")[0] or "-"
            date = time.strftime("%Y-%m-%d", time.gmtime(day * 86_400))
            expected[(date, who)] = expected.get((date, who), 0) + 1
    got = {(row["days"][i], c["key"]): n for c in row["clients"] for i, n in enumerate(c["counts"]) if n}
    assert got == expected
    assert sum(expected.values()) == row["recent"] == 8  # 30 and 45 days back are outside the window
    assert row["kinds"] == kinds and row["live"] == 10
    assert len(row["days"]) == 30 and row["days"][-1] == time.strftime("%Y-%m-%d", time.gmtime(today * 86_400))
    facets = answer["facets"]
    assert {c["key"]: c["count"] for c in facets["clients"]} == {"claude-code": 4, "cursor": 3, "-": 3}


# -- recover --------------------------------------------------------------------------------------


def test_the_recover_preview_is_the_recover_commands_dry_run_and_apply_restores_it(
    server: WebServer, client: httpx.Client
):
    scope = "web-vanished"
    lost = [saved(server, scope, f"被不加锁的写入者覆盖掉的一条 {i}") for i in range(2)]
    kept = saved(server, scope, "留下的一条")
    erase_all_but(server.store_dir, scope, kept)
    assert client.get("/api/overview").json()["vanished"] == 2
    before = store_bytes(server)
    preview = post(client, "/api/recover", {"dryRun": True}).json()
    assert store_bytes(server) == before
    cli = recover_dry_run(server.store_dir)
    restored = cli["restored"]
    assert {s: sorted(ids) for s, ids in restored.items()} == {scope: sorted(lost)}
    assert cli["refused"] == {} and preview["refused"] == [] and preview["refusedTotal"] == 0
    assert preview["total"] == 2 and preview["byScope"] == {scope: 2}
    assert sorted(r["id"] for r in preview["records"]) == sorted(lost)
    assert {r["content"] for r in preview["records"]} == {f"被不加锁的写入者覆盖掉的一条 {i}" for i in range(2)}
    done = post(client, "/api/recover", {"dryRun": False}).json()
    assert done["total"] == 2 and set(lost) <= set(on_disk(server, scope))
    assert client.get("/api/overview").json()["vanished"] == 0


def test_recover_can_be_limited_to_one_scope_and_refuses_a_scope_that_is_not_a_name(
    server: WebServer, client: httpx.Client
):
    one, two = "web-vanished-one", "web-vanished-two"
    lost = {}
    for scope in (one, two):
        lost[scope] = saved(server, scope, f"被覆盖的一条 {scope}")
        erase_all_but(server.store_dir, scope, saved(server, scope, f"留下的一条 {scope}"))
    done = post(client, "/api/recover", {"dryRun": False, "scope": one}).json()
    assert done["total"] == 1 and done["byScope"] == {one: 1}
    assert lost[one] in on_disk(server, one) and lost[two] not in on_disk(server, two)
    assert post(client, "/api/recover", {"dryRun": True}).json()["byScope"] == {two: 1}
    for bad in ("", 7, ["x"]):
        r = post(client, "/api/recover", {"dryRun": False, "scope": bad})
        assert r.status_code == 400 and r.json()["code"] == "SCOPE_INVALID", bad
    assert lost[two] not in on_disk(server, two)


def test_recover_refuses_a_cross_site_post(server: WebServer, client: httpx.Client):
    r = post(client, "/api/recover", {"dryRun": False}, Origin="http://evil.example")
    assert r.status_code == 403


# -- import, export, version, overview -------------------------------------------------------------


def test_import_dry_run_writes_nothing_and_apply_adds_exactly_what_it_announced(
    server: WebServer, client: httpx.Client, tmp_path: Path
):
    scope = "web-import"
    existing = saved(server, scope, "导入前已存在")
    lines = [
        new_record(scope=scope, content="导入的新记录一", now=1).raw,
        new_record(scope=scope, content="导入的新记录二", now=2).raw,
        json.dumps({"type": "entity", "name": "小明", "entityType": "person", "observations": ["喜欢 Rust"]}),
        "这一行不是 JSON",
    ]
    text = "\n".join(lines) + "\n"
    files_before = store_bytes(server)
    dry = post(client, "/api/import", {"text": text, "scope": scope, "dryRun": True})
    assert dry.status_code == 200, dry.text
    preview = dry.json()
    assert (preview["added"], preview["existing"], preview["bad"]) == (3, 0, 1)
    assert preview["problems"] == ["第 4 行不是 JSON,已跳过:这一行不是 JSON"]
    assert store_bytes(server) == files_before
    applied = post(client, "/api/import", {"text": text, "scope": scope, "dryRun": False}).json()
    assert (applied["added"], applied["existing"], applied["bad"]) == (3, 0, 1)
    contents = {r["content"] for r in on_disk(server, scope).values()}
    assert contents == {"导入前已存在", "导入的新记录一", "导入的新记录二", "小明: 喜欢 Rust"}
    again = post(client, "/api/import", {"text": text, "scope": scope, "dryRun": True}).json()
    assert (again["added"], again["existing"]) == (0, 3)
    assert existing in on_disk(server, scope)


def test_an_import_preview_lists_the_files_memories_by_first_line_scope_and_kind_the_first_fifty(
    server: WebServer, client: httpx.Client
):
    scope = "web-import-listed"
    lines = [
        new_record(scope=scope, content=f"\n  第 {i} 条的第一行\n第二行不列出", kind="rule", now=i).raw
        for i in range(55)
    ]
    lines += [new_record(scope="global", content="x" * 300, now=99).raw]
    lines.append(json.dumps({"type": "entity", "name": "小明", "entityType": "person", "observations": ["喜欢 Rust"]}))
    text = "\n".join(lines) + "\n"
    preview = post(client, "/api/import", {"text": text, "scope": scope, "dryRun": True}).json()
    assert preview["memoriesTotal"] == 57
    listed = preview["memories"]
    assert len(listed) == 50
    assert listed[0] == {"scope": scope, "kind": "rule", "line": "第 0 条的第一行"}
    assert [m["line"] for m in listed] == [f"第 {i} 条的第一行" for i in range(50)]
    # Another scope's records and the knowledge graph's facts (into the chosen scope) are listed too.
    few = "\n".join([lines[0], lines[55], lines[56]]) + "\n"
    short = post(client, "/api/import", {"text": few, "scope": scope, "dryRun": True}).json()
    assert short["memoriesTotal"] == 3
    assert sorted((m["scope"], m["kind"], m["line"]) for m in short["memories"]) == sorted(
        [
            (scope, "rule", "第 0 条的第一行"),
            ("global", "note", "x" * 119 + "…"),
            (scope, "fact", "小明: 喜欢 Rust"),
        ]
    )
    # The import itself answers with what it did, not a listing.
    done = post(client, "/api/import", {"text": few, "scope": scope, "dryRun": False}).json()
    assert done["added"] == 3 and "memories" not in done


def test_an_import_refuses_per_record_what_memory_save_would_refuse_in_the_preview_and_the_result(
    server: WebServer, client: httpx.Client
):
    scope = "web-import-refused"
    token = "ghp_" + "Zx81Qw0aB7" * 4
    lines = [
        new_record(scope=scope, content="网页导入的正常记录", now=1).raw,
        new_record(scope=scope, content="长" * 20_001, now=2).raw,
        new_record(scope=scope, content="带坏标签", tags=["x" * 65], now=3).raw,
        new_record(scope=scope, content=f"部署用 {token}", now=4).raw,
    ]
    text = "\n".join(lines) + "\n"
    for dry_run in (True, False):
        r = post(client, "/api/import", {"text": text, "scope": scope, "dryRun": dry_run})
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["added"], body["existing"], body["bad"], body["refused"]) == (1, 0, 0, 3)
        assert [(x["line"], x["code"]) for x in body["refusals"]] == [
            (2, "CONTENT_TOO_LONG"),
            (3, "TAGS_INVALID"),
            (4, "CONTENT_SECRET"),
        ]
        assert "拒绝 3 条" in body["message"]
        assert token not in r.text
    assert [x["content"] for x in on_disk(server, scope).values()] == ["网页导入的正常记录"]


def test_an_import_file_that_is_not_utf8_is_checked_line_by_line_like_the_cli(server: WebServer, client: httpx.Client):
    scope = "web-import-bytes"
    good = new_record(scope=scope, content="好的一行", now=1).raw.encode("utf-8")
    bad = new_record(scope=scope, content="坏的一行", now=2).raw.encode("utf-8").replace("坏".encode(), b"\xff\xfe")
    data = base64.b64encode(good + b"\n" + bad + b"\n").decode("ascii")
    r = post(client, "/api/import", {"data": data, "scope": scope, "dryRun": False})
    assert r.status_code == 200, r.text
    assert (r.json()["added"], r.json()["bad"]) == (1, 1)
    assert r.json()["problems"][0].startswith("第 2 行不是 UTF-8 文本")
    assert [x["content"] for x in on_disk(server, scope).values()] == ["好的一行"]


def test_export_downloads_the_scope_lines_byte_for_byte(server: WebServer, client: httpx.Client):
    scope = "web-export"
    saved(server, scope, "导出的记录 <b>原样</b>")
    r = client.get("/api/export", params={"scope": scope})
    assert r.status_code == 200
    assert "attachment" in r.headers["content-disposition"]
    assert r.content == (server.store_dir / scope_file_relpath(scope)).read_bytes()


def test_the_version_changes_when_another_process_writes(server: WebServer, client: httpx.Client):
    before = client.get("/api/version").json()["version"]
    assert client.get("/api/version").json()["version"] == before
    saved(server, "web-version", "另一个进程写入")
    assert client.get("/api/version").json()["version"] != before


def test_the_overview_counts_live_expired_and_corrupt_lines_per_scope(server: WebServer, client: httpx.Client):
    scope = "web-health"
    keep = saved(server, scope, "有效")
    saved(server, scope, "被取代的新版本", supersedes=saved(server, scope, "被取代"))
    path = server.store_dir / scope_file_relpath(scope)
    with path.open("ab") as fh:
        fh.write(b"{not json\n")
    rows = {row["scope"]: row for row in client.get("/api/overview").json()["scopes"]}
    assert (rows[scope]["live"], rows[scope]["expired"], rows[scope]["corrupt"]) == (2, 1, 1)
    assert keep in on_disk(server, scope)


def test_the_vector_state_names_no_model_when_no_backend_is_configured(client: httpx.Client):
    vectors = client.get("/api/overview").json()["vectors"]
    assert vectors == {"state": "off", "reason": "DSH_MEMORY_VECTOR=off"}


@pytest.mark.parametrize(
    ("env", "state", "model"),
    [
        pytest.param(
            {"DSH_MEMORY_VECTOR": "on", "DSH_MEMORY_EMBED_MODEL": "/nonexistent/qwen3-embedding-0.6b-Q8_0.gguf"},
            "down",
            "qwen3-embedding-0.6b",
            id="configured-but-missing",
        ),
    ],
)
def test_the_vector_state_is_consistent_with_what_is_configured(tmp_path: Path, env, state, model):
    with running_web(tmp_path / "store", tmp_path, **env) as srv:
        auth = {"Authorization": f"Bearer {srv.token}"}
        deadline = time.monotonic() + 30
        while True:  # the backend's first bring-up runs in the background: wait for its answer
            vectors = httpx.get(srv.base + "/api/overview", headers=auth).json()["vectors"]
            if state == "off" or "模型" in (vectors.get("reason") or "") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert vectors["state"] == state
    assert vectors.get("model") == model  # a model is named only when a backend is configured
    assert vectors["reason"].startswith("模型文件不存在") and "已退化" not in vectors["reason"]


def test_highlight_terms_are_the_querys_words_and_bigrams_without_stop_words():
    from dsh_memory_mcp.service.browse import highlight_terms

    terms = highlight_terms("the deploy 数据库")
    assert {"deploy", "数据", "据库"} <= set(terms)
    assert "the" not in terms and "数" not in terms
    assert highlight_terms("猫") == ["猫"]  # a query of one weak character still marks it


@pytest.mark.parametrize(
    ("date", "tz", "code"),
    [("2026-02-30", 0, "DATE_INVALID"), ("tomorrow", 0, "DATE_INVALID"), ("2026-01-01", 900, "TZ_INVALID")],
)
def test_a_bad_date_or_time_zone_is_a_coded_error(date: str, tz: int, code: str):
    from dsh_memory_mcp.errors import InvalidArgument
    from dsh_memory_mcp.service.browse import day_bounds

    with pytest.raises(InvalidArgument) as caught:
        day_bounds(date, tz)
    assert caught.value.code == code


def test_the_writers_table_follows_appends_and_rewrites_and_equals_a_fresh_parse(store: SharedStore):
    from dsh_memory_mcp.service.browse import writer_of, writers

    for i, client in enumerate(["claude-code/1.0", None, "Cursor/2", "web"]):
        store.save("global", f"谁写的 {i}", source={"origin": "explicit", **({"client": client} if client else {})})
    first = writers(store.snapshot("global"))
    assert [w.key for w in first] == ["claude-code", "-", "cursor", "web"]
    assert first[2].name == "Cursor" and first[2].full == "Cursor/2"
    store.save("global", "追加的一条", source={"origin": "explicit", "client": "codex/0.1"})
    appended = store.snapshot("global")
    assert "writers_previous" in appended.cache  # the old table travelled with the new version
    assert list(writers(appended)) == [writer_of(r) for r in appended.records]
    gone = appended.records[1].id
    store.delete_ids([gone])
    rewritten = store.snapshot("global")
    assert list(writers(rewritten)) == [writer_of(r) for r in rewritten.records]
    assert [w.key for w in writers(rewritten)] == ["claude-code", "cursor", "web", "codex"]
