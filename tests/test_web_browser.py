"""The web page in a real browser: Debian's Chromium driven by Playwright, against a real `serve`.

One browser and one server for the module (kept lean: the whole module is a few dozen seconds).
A memory is saved through MCP by a real stdio server process on the same store; the page must
find it, show other processes' changes without a reload, render HTML in memories as text, edit
(a supersede on disk), forget after a confirmation, import after a dry run, refuse cross-site
posts, and stay usable at 400 px. Screenshots of the main views go to ``DSH_MEMORY_SCREENSHOTS``
(default: a temp dir) — look at them when the page changes.

Needs ``/usr/bin/chromium`` (``.ci/run`` installs it with apt); without it the module is skipped,
except under ``CI=true``, where a missing browser fails.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_memory_mcp.store.shared import SharedStore
from tests.helpers.mcp_session import StdioSession, server_params, stdio_session
from tests.helpers.web_server import WebServer, running_web

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
LIVE_UPDATE_SECONDS = 10  # the page polls every 2 s


def _need(condition: bool, why: str) -> None:
    if condition:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why} (CI=true: browser tests must run)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _need(os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: apt-get install -y chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need(False, "playwright is not installed: pip install -e '.[test]'")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("web-browser")


@pytest.fixture(scope="module")
def shots(root: Path) -> Path:
    folder = Path(os.environ.get("DSH_MEMORY_SCREENSHOTS") or root / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[WebServer]:
    with running_web(root / "store", root) as srv:
        yield srv


@pytest.fixture(scope="module")
def mcp(server: WebServer, root: Path) -> Iterator[StdioSession]:
    """A real stdio MCP server on the same store, driven by the official client."""
    params = server_params(
        server.store_dir, project=root, DSH_MEMORY_VECTOR="off", DSH_MEMORY_TOUCH_INTERVAL_SECS="86400"
    )
    with stdio_session(params, root / "mcp-stdio.stderr") as session:
        yield session


@pytest.fixture(scope="module")
def context(browser: Any, server: WebServer) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1280, "height": 860}, locale="zh-CN", accept_downloads=True)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture
def page(context: Any, server: WebServer) -> Iterator[Any]:
    """A logged-in page (through the login URL), with a record of dialogs and page errors."""
    pg = context.new_page()
    pg.dialogs = []  # type: ignore[attr-defined]
    pg.errors = []  # type: ignore[attr-defined]
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    # Console errors catch CSP refusals and script errors; answers with a 4xx status (an expected
    # coded error) are logged by Chromium too and are not errors of the page.
    pg.on(
        "console",
        lambda m: pg.errors.append(m.text) if m.type == "error" and "Failed to load resource" not in m.text else None,
    )
    pg.goto(server.login_url)
    pg.wait_for_selector("html[data-ready=true]")
    try:
        yield pg
    finally:
        assert pg.errors == [], pg.errors
        pg.close()


def save(server: WebServer, scope: str, content: str, **kw: Any) -> str:
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


def card(page: Any, ident: str) -> Any:
    return page.locator(f'li.card[data-record="{ident}"]')


def fresh(page: Any) -> None:
    """Reload (faster than waiting for the 2 s poll; one test proves the poll itself)."""
    page.reload()
    page.wait_for_selector("html[data-ready=true]")


# -- login -------------------------------------------------------------------------------------


def test_the_login_url_logs_in_and_lands_on_the_clean_url(browser: Any, server: WebServer, shots: Path):
    save(server, "global", "用户偏好用中文回答,代码注释用英文", kind="preference", tags=["语言"], importance=0.9)
    save(server, "project:/home/me/app", "本项目的 API 用 FastAPI,测试用 pytest", kind="fact", tags=["python"])
    save(server, "global", "Never force-push to main; rebase and fast-forward only.", kind="rule", tags=["git"])
    ctx = browser.new_context(viewport={"width": 1280, "height": 860})
    try:
        pg = ctx.new_page()
        pg.goto(server.login_url)
        pg.wait_for_selector("html[data-ready=true]")
        assert pg.url == server.base + "/"
        [cookie] = ctx.cookies()
        assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
        assert cookie["value"] != server.token
        assert pg.evaluate("document.cookie") == ""  # HttpOnly: no script can read it
        assert pg.locator("#scope-list").inner_text().count("global") >= 1
        assert "/home/me/app" in pg.locator("#scope-list").inner_text()
        assert "用户偏好用中文回答" in pg.locator("#memory-list").inner_text()
        pg.screenshot(path=str(shots / "main.png"))
    finally:
        ctx.close()


def test_a_page_without_the_cookie_gets_no_data(browser: Any, server: WebServer, shots: Path):
    save(server, "global", "没有登录的人看不到这条记忆")
    ctx = browser.new_context(viewport={"width": 1280, "height": 600})
    try:
        pg = ctx.new_page()
        pg.goto(server.base + "/")
        pg.wait_for_selector("html[data-ready=login]")
        assert pg.locator("#login-needed").is_visible()
        assert not pg.locator("#app").is_visible()
        assert "没有登录的人" not in pg.content()
        status = pg.evaluate("fetch('/api/memories?scope=all').then(r => r.status)")
        assert status == 401
        pg.screenshot(path=str(shots / "login-needed.png"))
    finally:
        ctx.close()


# -- search and live updates -------------------------------------------------------------------


def test_a_memory_saved_through_mcp_appears_without_reload_and_a_chinese_search_finds_it(
    page: Any, mcp: StdioSession, server: WebServer, shots: Path
):
    page.evaluate("window.__notReloaded = true")
    result = mcp.call("memory_save", {"content": "部署前先运行数据库迁移脚本 scripts/migrate.sh", "scope": "global"})
    ident = result.structured_content["id"]
    card(page, ident).wait_for(timeout=LIVE_UPDATE_SECONDS * 1000)
    assert page.evaluate("window.__notReloaded") is True
    page.fill("#q", "数据库迁移")
    page.press("#q", "Enter")
    page.wait_for_selector("#list-title:has-text('数据库迁移')")
    first = page.locator("li.card").first
    assert first.get_attribute("data-record") == ident
    assert "相关度" in first.inner_text()
    page.screenshot(path=str(shots / "search.png"))
    # The same ranking as memory_search: the page shows the tool's order.
    tool = mcp.call("memory_search", {"query": "数据库迁移", "scope": "all", "topK": 20}).structured_content
    shown = [c.get_attribute("data-record") for c in page.locator("li.card").all()]
    assert shown == [r["id"] for r in tool["records"]]


def test_html_in_a_memory_is_shown_as_text(page: Any, server: WebServer):
    ident = save(server, "global", "<img src=x onerror=alert(1)> 和 <b>粗体</b>")
    fresh(page)
    text = card(page, ident).locator(".content").inner_text()
    assert text == "<img src=x onerror=alert(1)> 和 <b>粗体</b>"
    assert page.locator("#memory-list img, #memory-list b").count() == 0
    card(page, ident).locator("[data-role=open]").click()
    page.wait_for_selector("#detail-dialog[open]")
    assert page.input_value("#edit-content") == "<img src=x onerror=alert(1)> 和 <b>粗体</b>"
    page.keyboard.press("Escape")
    assert page.dialogs == []  # type: ignore[attr-defined]


# -- edit and forget ---------------------------------------------------------------------------


def test_an_edit_in_the_page_is_a_supersede_on_disk(page: Any, server: WebServer, shots: Path):
    old = save(server, "global", "周报在每周五下午发", kind="note", tags=["例会"])
    fresh(page)
    card(page, old).locator("[data-role=open]").click()
    page.wait_for_selector("#detail-dialog[open]")
    # Bad input first: the tool's code next to the field, nothing written.
    # (Other records' access counts may be flushed meanwhile by an earlier test's search: the refused
    # edit must add no line and leave this record's line byte-identical.)
    before = (server.store_dir / "global.jsonl").read_bytes().splitlines()
    page.fill("#edit-importance", "很高")
    page.click("#edit-save")
    page.wait_for_selector("#err-importance:has-text('IMPORTANCE_RANGE')")
    assert page.get_attribute("#edit-importance", "aria-invalid") == "true"
    page.screenshot(path=str(shots / "edit-error.png"))
    after = (server.store_dir / "global.jsonl").read_bytes().splitlines()
    mine = f'"id":"{old}"'.encode()
    assert len(after) == len(before)
    assert [line for line in after if mine in line] == [line for line in before if mine in line]
    page.fill("#edit-importance", "0.8")
    page.fill("#edit-content", "周报改在每周四下午发")
    page.fill("#edit-tags", "例会, 周报")
    page.select_option("#edit-kind", "rule")
    page.click("#edit-save")
    page.wait_for_selector("#detail-dialog", state="hidden")
    page.wait_for_selector("#toast:has-text('取代')")
    records = on_disk(server)
    [new] = [r for r in records.values() if r.get("supersedes") == old]
    assert records[old]["expiredAt"] <= new["createdAt"]
    assert (new["content"], new["kind"], new["tags"], new["importance"]) == (
        "周报改在每周四下午发",
        "rule",
        ["例会", "周报"],
        0.8,
    )
    card(page, new["id"]).wait_for()
    assert card(page, old).count() == 0


def test_forget_one_asks_first_and_cancel_keeps_it(page: Any, server: WebServer, shots: Path):
    ident = save(server, "global", "这条记忆会在确认后被删除")
    fresh(page)
    card(page, ident).locator("[data-role=forget]").click()
    page.wait_for_selector("#confirm-dialog[open]")
    assert "这条记忆会在确认后被删除" in page.locator("#confirm-items").inner_text()
    assert page.evaluate("document.activeElement.id") == "confirm-cancel"  # the safe choice has focus
    page.screenshot(path=str(shots / "confirm-forget.png"))
    page.keyboard.press("Enter")  # = cancel
    page.wait_for_selector("#confirm-dialog", state="hidden")
    assert ident in on_disk(server)
    card(page, ident).locator("[data-role=forget]").click()
    page.click("#confirm-ok")
    card(page, ident).wait_for(state="detached")
    assert ident not in on_disk(server)


def test_forget_a_selection_removes_exactly_the_checked_ones(page: Any, server: WebServer):
    scope = "web-browser-selection"
    ids = [save(server, scope, f"批量删除 {i}") for i in range(3)]
    fresh(page)
    page.click(f'.scope-btn[data-scope="{scope}"]')
    card(page, ids[2]).wait_for()
    card(page, ids[0]).locator("input[type=checkbox]").check()
    card(page, ids[1]).locator("input[type=checkbox]").check()
    assert page.inner_text("#forget-selected") == "删除所选(2)"
    page.click("#forget-selected")
    assert page.locator("#confirm-items li").count() == 2
    page.click("#confirm-ok")
    card(page, ids[0]).wait_for(state="detached")
    assert set(on_disk(server, scope)) == {ids[2]}


# -- import ------------------------------------------------------------------------------------


def test_import_previews_without_writing_then_applies(page: Any, server: WebServer, root: Path, shots: Path):
    scope = "web-browser-import"
    save(server, scope, "导入前已经有的记忆")
    graph = [
        {"type": "entity", "name": "小红", "entityType": "person", "observations": ["用 Neovim", "住在杭州"]},
        {"type": "relation", "from": "小红", "relationType": "维护", "to": "记忆服务"},
    ]
    source = root / "import.jsonl"
    source.write_text("\n".join(json.dumps(g, ensure_ascii=False) for g in graph) + "\n坏行\n", encoding="utf-8")
    fresh(page)
    page.click(f'.scope-btn[data-scope="{scope}"]')
    before = {p: p.read_bytes() for p in server.store_dir.rglob("*.jsonl")}
    page.click("#import-open")
    page.set_input_files("#import-file", str(source))
    assert page.input_value("#import-scope") == scope
    page.click("#import-dry")
    page.wait_for_selector("#import-preview:has-text('将新增 3 条')")
    assert "跳过 1 行" in page.inner_text("#import-preview")
    assert "第 3 行不是 JSON" in page.inner_text("#import-preview")
    page.screenshot(path=str(shots / "import-preview.png"))
    assert {p: p.read_bytes() for p in server.store_dir.rglob("*.jsonl")} == before
    page.click("#import-apply")
    page.wait_for_selector("#import-preview:has-text('已新增 3 条')")
    contents = {r["content"] for r in on_disk(server, scope).values()}
    assert contents == {"导入前已经有的记忆", "小红: 用 Neovim", "小红: 住在杭州", "小红 维护 记忆服务"}
    page.click("#import-close")
    page.wait_for_selector("li.card:has-text('小红: 住在杭州')")


def test_export_downloads_the_current_scope(page: Any, server: WebServer, root: Path):
    scope = "web-browser-export"
    ident = save(server, scope, "导出测试")
    fresh(page)
    page.click(f'.scope-btn[data-scope="{scope}"]')
    with page.expect_download() as info:
        page.click("#export-link")
    path = root / "export.jsonl"
    info.value.save_as(str(path))
    [line] = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["id"] == ident


# -- security in the browser -------------------------------------------------------------------


@contextlib.contextmanager
def other_origin() -> Iterator[str]:
    """Another origin on loopback (same site, other port: the cookie *is* sent from there)."""
    page = b"<!doctype html><title>other</title><form id=f method=post enctype=text/plain><input id=i></form>"

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def test_a_cross_site_post_from_another_origin_is_refused(context: Any, server: WebServer):
    ident = save(server, "global", "别的网站删不掉这条")
    pg = context.new_page()
    try:
        pg.goto(server.login_url)  # the context now holds the cookie, which is sent from the other port too
        with other_origin() as evil:
            pg.goto(evil + "/")
            # A form post (text/plain smuggling JSON) and a no-cors fetch: both reach the server.
            with pg.expect_response(lambda r: r.url.endswith("/api/forget")) as form_answer:
                pg.evaluate(
                    """([url, id]) => {
                        const f = document.getElementById('f'), i = document.getElementById('i');
                        f.action = url; i.name = '{"ids":["' + id + '"],"x":"'; i.value = '"}'; f.submit();
                    }""",
                    [server.base + "/api/forget", ident],
                )
            assert form_answer.value.status == 403
            pg.wait_for_url(server.base + "/api/forget")
            assert "CROSS_SITE" in pg.locator("body").inner_text()
            pg.goto(evil + "/")
            assert ident in on_disk(server)
            # The answer (a 403) is opaque to that page, and Cross-Origin-Resource-Policy makes the
            # browser drop it; the promise settles once the server has answered.
            pg.evaluate(
                """([url, id]) => fetch(url, {method: 'POST', mode: 'no-cors', credentials: 'include',
                    headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({ids: [id]})})
                    .then(() => 'opaque', () => 'dropped')""",
                [server.base + "/api/forget", ident],
            )
            assert ident in on_disk(server)
            # With a JSON content type the browser must ask first (preflight), and gets no yes.
            outcome = pg.evaluate(
                """([url, id]) => fetch(url, {method: 'POST', credentials: 'include',
                    headers: {'Content-Type': 'application/json'}, body: JSON.stringify({ids: [id]})})
                    .then(r => 'answered ' + r.status, e => 'blocked')""",
                [server.base + "/api/forget", ident],
            )
            assert outcome == "blocked"
    finally:
        pg.close()
    assert ident in on_disk(server)


# -- usable by keyboard, labelled, narrow ------------------------------------------------------


def test_every_control_has_a_label_and_the_keyboard_reaches_search_and_a_memory(page: Any, server: WebServer):
    unlabeled = page.evaluate(
        """() => [...document.querySelectorAll('input, select, textarea, button, a[href]')]
            .filter(e => !(e.labels && e.labels.length) && !e.getAttribute('aria-label')
                      && !(e.textContent || '').trim())
            .map(e => e.outerHTML.slice(0, 80))"""
    )
    assert unlabeled == []
    ident = save(server, "global", "键盘也能打开这条记忆")
    fresh(page)
    page.locator("body").focus()
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("键盘")
    page.keyboard.press("Enter")
    page.wait_for_selector("#list-title:has-text('键盘')")
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.role") == "open":
            break
    assert page.evaluate("document.activeElement.dataset.id") == ident
    page.keyboard.press("Enter")
    page.wait_for_selector("#detail-dialog[open]")
    assert page.evaluate("document.activeElement.id") == "edit-content"
    page.keyboard.press("Escape")
    page.wait_for_selector("#detail-dialog", state="hidden")


def test_the_page_is_readable_in_a_400px_window(page: Any, server: WebServer, shots: Path):
    save(server, "global", "窄窗口下也要读得清楚的一条很长很长的记忆," * 4, tags=["移动端", "窄屏"])
    page.set_viewport_size({"width": 400, "height": 900})
    page.reload()
    page.wait_for_selector("html[data-ready=true]")
    assert page.evaluate("document.documentElement.scrollWidth") <= 400
    for selector in ["#q", "#scope-list", "#memory-list", "li.card >> nth=0"]:
        box = page.locator(selector).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 400, selector
    size = page.evaluate("parseFloat(getComputedStyle(document.querySelector('.card .content')).fontSize)")
    assert size >= 14
    page.screenshot(path=str(shots / "narrow-400.png"))
    page.screenshot(path=str(shots / "narrow-400-full.png"), full_page=True)
