"""The web page's HTTP side, over real HTTP on loopback: login, refusal, headers, the JSON API.

A real `dsh-memory-mcp serve` process (tests/helpers/web_server.py) serves the page next to `/mcp`;
the test talks to it with httpx and checks the store files on disk. The browser side is tests/test_web_browser.py.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dsh_memory_mcp.store.records import new_record
from dsh_memory_mcp.store.scopes import scope_file_relpath
from dsh_memory_mcp.store.shared import SharedStore
from dsh_memory_mcp.transports.web import host_allowed
from tests.helpers.web_server import WebServer, running_web, running_web_app

pytestmark = pytest.mark.slow

READS = ["/api/session", "/api/version", "/api/overview", "/api/memories", "/api/search?q=x", "/api/export"]
WRITES = ["/api/forget", "/api/import", "/api/memories/00000000/edit"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    root = tmp_path_factory.mktemp("web-api")
    with running_web(root / "store", root) as srv:
        yield srv


@pytest.fixture(scope="module")
def host_checked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebServer]:
    """`web_routes(..., allowed_hosts=...)` alone in a Starlette app (serve does its own Host rules)."""
    root = tmp_path_factory.mktemp("web-hosts")
    with running_web_app(root / "store", root, "--allowed-host", "127.0.0.1:*", "--allowed-host", "localhost:*") as srv:
        yield srv


@pytest.fixture
def client(server: WebServer) -> Iterator[httpx.Client]:
    """A client that is logged in the way a browser is: through the login URL's cookie."""
    with httpx.Client(base_url=server.base, timeout=30) as c:
        login = c.get(f"/?token={server.token}")
        assert login.status_code == 303
        yield c


def saved(server: WebServer, scope: str, content: str, **kw) -> str:
    """Save through another process's view of the store (this test process), return the id."""
    store = SharedStore(str(server.store_dir))
    try:
        return store.save(scope, content, **kw).record.id
    finally:
        store.close()


def on_disk(server: WebServer, scope: str = "global") -> dict[str, dict]:
    store = SharedStore(str(server.store_dir))
    try:
        return {r.id: r.data for r in store.snapshot(scope).records}
    finally:
        store.close()


def post(c: httpx.Client, path: str, body: object, **headers: str) -> httpx.Response:
    return c.post(path, content=json.dumps(body), headers={"Content-Type": "application/json", **headers})


# -- login and refusal -------------------------------------------------------------------------


def test_the_login_url_sets_an_httponly_samesite_strict_cookie_and_redirects_to_the_clean_url(server: WebServer):
    with httpx.Client(base_url=server.base) as c:
        r = c.get(f"/?token={server.token}")
    assert r.status_code == 303
    assert r.headers["location"] == "/"
    cookie = r.headers["set-cookie"]
    attrs = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "samesite", "path"} <= attrs
    assert "samesite=strict" in cookie.lower()
    assert server.token not in cookie  # the cookie is derived from the token, not the token itself
    assert r.headers["referrer-policy"] == "no-referrer"


def test_a_wrong_token_in_the_login_url_gets_401_and_no_cookie(server: WebServer):
    with httpx.Client(base_url=server.base) as c:
        r = c.get("/?token=not-the-token")
        assert r.status_code == 401
        assert "set-cookie" not in r.headers
        assert "登录链接无效" in r.text
        assert c.get("/api/overview").status_code == 401


def test_a_host_outside_the_allow_list_gets_421_even_with_the_token(host_checked: WebServer):
    """DNS rebinding: a foreign name that resolves to loopback reaches the socket, not the page."""
    srv = host_checked
    for path in ["/", "/api/overview", f"/?token={srv.token}"]:
        r = httpx.get(srv.base + path, headers={"Host": "rebind.example:80", "Authorization": f"Bearer {srv.token}"})
        assert r.status_code == 421, path
        assert "set-cookie" not in r.headers
    assert httpx.get(srv.base + "/", headers={"Host": "localhost:1234"}).status_code == 200


def test_serve_prints_the_login_url_once_and_it_logs_a_browser_in(server: WebServer):
    err = server.stderr_text()
    assert server.login_url == f"{server.base}/?token={server.token}"
    assert err.count(server.token) == 1  # printed once, nowhere else
    with httpx.Client() as c:
        assert c.get(server.login_url).status_code == 303
        assert c.get(server.base + "/api/session").json()["ok"] is True


@pytest.mark.parametrize(
    ("host", "allowed", "ok"),
    [
        pytest.param("127.0.0.1:7766", ["127.0.0.1:*"], True, id="any-port"),
        pytest.param("127.0.0.1:7766", ["127.0.0.1:7766"], True, id="exact"),
        pytest.param("127.0.0.1:7767", ["127.0.0.1:7766"], False, id="other-port"),
        pytest.param("127.0.0.10:7766", ["127.0.0.1:*"], False, id="longer-name"),
        pytest.param("", ["127.0.0.1:*"], False, id="missing"),
        pytest.param("evil.example", ["127.0.0.1:*", "localhost:*"], False, id="foreign"),
    ],
)
def test_the_host_rule_is_exact_or_any_port(host: str, allowed: list[str], ok: bool):
    assert host_allowed(host, allowed) is ok


@pytest.mark.parametrize("path", READS)
def test_every_read_without_the_cookie_or_the_bearer_token_is_401(server: WebServer, path: str):
    saved(server, "global", "只有登录的人能看到这条")
    r = httpx.get(server.base + path)
    assert r.status_code == 401
    assert r.json()["code"] == "UNAUTHORIZED"
    assert "只有登录的人" not in r.text


@pytest.mark.parametrize("path", WRITES)
def test_every_write_without_the_cookie_or_the_bearer_token_is_401(server: WebServer, path: str):
    r = httpx.post(server.base + path, content="{}", headers={"Content-Type": "application/json"})
    assert r.status_code == 401


def test_the_page_itself_is_served_without_login_but_carries_no_data(server: WebServer):
    saved(server, "global", "页面 HTML 里不该有这条")
    r = httpx.get(server.base + "/")
    assert r.status_code == 200
    assert "页面 HTML 里不该有这条" not in r.text
    assert '<script src="/static/app.js"' in r.text


def test_the_bearer_token_works_instead_of_the_cookie_and_a_wrong_one_does_not(server: WebServer):
    ok = httpx.get(server.base + "/api/overview", headers={"Authorization": f"Bearer {server.token}"})
    bad = httpx.get(server.base + "/api/overview", headers={"Authorization": "Bearer nope"})
    assert ok.status_code == 200 and ok.json()["ok"] is True
    assert bad.status_code == 401


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        pytest.param({"Origin": "http://evil.example"}, "CROSS_SITE", id="foreign-origin"),
        pytest.param({"Origin": "null"}, "CROSS_SITE", id="null-origin"),
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
    for path in ["/", "/static/app.js", "/static/app.css", "/api/overview", "/api/nothing-here-is-ours"]:
        r = client.get(path)
        if r.status_code == 404 and path.startswith("/api/nothing"):
            continue  # not one of our routes: the host app answers
        csp = r.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["referrer-policy"] == "no-referrer"
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/../web.py").status_code == 404


def test_the_page_has_no_inline_script_or_style_and_the_script_never_uses_innerhtml(server: WebServer):
    page = httpx.get(server.base + "/").text
    assert "<script>" not in page and "<style" not in page and " style=" not in page and "onclick=" not in page
    script = httpx.get(server.base + "/static/app.js").text
    assert "innerHTML" not in script.replace("never through innerHTML", "")
    assert "insertAdjacentHTML" not in script and "document.write" not in script and "eval(" not in script


def test_an_oversized_body_is_refused_with_413_before_anything_is_read(server: WebServer, client: httpx.Client):
    r = post(client, "/api/forget", {"ids": ["x" * (2 << 20)]})
    assert r.status_code == 413
    assert r.json()["code"] == "BODY_TOO_LARGE"


# -- the API -----------------------------------------------------------------------------------


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


def test_a_search_from_the_page_finds_chinese_and_does_not_count_as_an_access(server: WebServer, client: httpx.Client):
    ident = saved(server, "global", "网页检索不应增加访问次数:向量检索的阈值")
    r = client.get("/api/search", params={"q": "访问次数", "scope": "all"})
    assert r.status_code == 200
    hits = r.json()["records"]
    assert hits[0]["id"] == ident and hits[0]["score"] > 0
    assert hits[0]["accessCount"] == 0 and hits[0]["source"] == {"origin": "explicit"}
    time.sleep(2.6)  # longer than the store's touch delay (2 s): a touch would have been written by now
    assert on_disk(server)[ident]["accessCount"] == 0


def test_the_list_is_newest_first_with_who_wrote_it_and_how_often_it_was_used(server: WebServer, client: httpx.Client):
    scope = "web-list-order"
    first = saved(server, scope, "列表里较早的一条")
    time.sleep(0.01)
    second = saved(server, scope, "列表里较新的一条")
    r = client.get("/api/memories", params={"scope": scope})
    assert [x["id"] for x in r.json()["records"]] == [second, first]
    assert {"accessCount", "createdAt", "source", "updatedAt", "kind", "tags"} <= set(r.json()["records"][0])


def test_forgetting_a_selection_removes_exactly_those_ids(server: WebServer, client: httpx.Client):
    scope = "web-forget-many"
    ids = [saved(server, scope, f"批量删除候选 {i}") for i in range(4)]
    r = post(client, "/api/forget", {"ids": ids[:3]})
    assert r.status_code == 200 and r.json()["deleted"] == 3
    assert set(on_disk(server, scope)) == {ids[3]}


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
    files_before = {p: p.read_bytes() for p in server.store_dir.rglob("*.jsonl")}
    dry = post(client, "/api/import", {"text": text, "scope": scope, "dryRun": True})
    assert dry.status_code == 200, dry.text
    preview = dry.json()
    assert (preview["added"], preview["existing"], preview["bad"]) == (3, 0, 1)
    assert preview["problems"] == ["第 4 行不是 JSON,已跳过:这一行不是 JSON"]
    assert {p: p.read_bytes() for p in server.store_dir.rglob("*.jsonl")} == files_before
    applied = post(client, "/api/import", {"text": text, "scope": scope, "dryRun": False}).json()
    assert (applied["added"], applied["existing"], applied["bad"]) == (3, 0, 1)
    contents = {r["content"] for r in on_disk(server, scope).values()}
    assert contents == {"导入前已存在", "导入的新记录一", "导入的新记录二", "小明: 喜欢 Rust"}
    again = post(client, "/api/import", {"text": text, "scope": scope, "dryRun": True}).json()
    assert (again["added"], again["existing"]) == (0, 3)
    assert existing in on_disk(server, scope)


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


def test_the_overview_counts_acknowledged_records_another_writer_erased(server: WebServer, client: httpx.Client):
    scope = "web-vanished"
    lost = saved(server, scope, "被不加锁的写入者覆盖掉的一条")
    kept = saved(server, scope, "留下的一条")
    path = server.store_dir / scope_file_relpath(scope)
    [keep] = [line for line in path.read_text(encoding="utf-8").splitlines() if kept in line]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(keep + "\n", encoding="utf-8")  # a whole-file rewrite from an old view, no lock
    tmp.replace(path)
    body = client.get("/api/overview").json()
    assert body["vanished"] == 1
    assert lost not in on_disk(server, scope)


def test_a_real_serve_refuses_a_rebinding_host_on_the_page_and_its_api(server: WebServer):
    """`serve` hands its own Host allow-list to the page: a DNS-rebinding name gets 421 on `/` and `/api`
    as on `/mcp`, even with the token; loopback names on any port stay allowed."""
    auth = {"Authorization": f"Bearer {server.token}"}
    for path in ("/", "/api/overview"):
        r = httpx.get(server.base + path, headers={"Host": "rebind.example", **auth})
        assert r.status_code == 421, (path, r.status_code)
    assert httpx.get(server.base + "/api/overview", headers={"Host": "localhost:9", **auth}).status_code == 200
