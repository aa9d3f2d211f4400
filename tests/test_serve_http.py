"""`dsh-memory-mcp serve` for real: a spawned process on loopback, the official client, raw HTTP."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.parse
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import subprocess_env
from tests.helpers.polling import until
from tests.helpers.serve_proc import (
    Serve,
    call_tool,
    initialize,
    no_stack,
    running_serve,
)
from tests.helpers.store_procs import Worker

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="signals and /proc: POSIX serve lifecycle"),
]


async def _with_session(serve: Serve, fn: Any, **headers: str) -> Any:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {serve.token}", **headers}) as http,
        streamable_http_client(serve.url, http_client=http) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await fn(session)


def test_the_official_client_works_over_streamable_http_and_sessions_share_one_store(tmp_path, store_dir):
    project = tmp_path / "工作区" / "app"
    project.mkdir(parents=True)
    with running_serve(store_dir, tmp_path / "err.log") as serve:

        async def scenario() -> dict[str, Any]:
            out: dict[str, Any] = {}

            async def first(s: ClientSession) -> None:
                out["tools"] = sorted(t.name for t in (await s.list_tools()).tools)
                saved = await s.call_tool("memory_save", {"content": "部署前先跑 make check", "kind": "procedure"})
                out["saved"] = saved.structured_content

            async def second(s: ClientSession) -> None:
                found = await s.call_tool("memory_search", {"query": "make check"})
                out["found"] = found.structured_content

            async def relayed(s: ClientSession) -> None:
                saved = await s.call_tool("memory_save", {"content": "这个仓库用 pnpm", "scope": "project"})
                out["relayed"] = saved.structured_content

            await _with_session(serve, first)
            await _with_session(serve, second)
            quoted = urllib.parse.quote(str(project), safe="/")
            await _with_session(serve, relayed, **{"X-DSH-Project": quoted})
            return out

        out = anyio.run(scenario)
        assert out["tools"] == ["memory_forget", "memory_get", "memory_list", "memory_save", "memory_search"]
        assert out["saved"]["ok"] is True and out["saved"]["scope"] == "global"
        assert [r["id"] for r in out["found"]["records"]] == [out["saved"]["id"]]
        # The relay's project header decides what a bare "project" means for that call.
        assert out["relayed"]["scope"] == f"project:{project}"
        lines = (store_dir / "global.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["content"] == "部署前先跑 make check"
        assert serve.health()["sessions"] == 0  # the client DELETEs its session when it closes

        # The web page is mounted next to /mcp, behind the same token; its login link (a one-time code in
        # the fragment, never the token, which the page's script trades for a page credential) was printed once.
        with httpx.Client(timeout=10) as http:
            assert http.get(f"{serve.base}/api/version").status_code == 401
            assert http.get(f"{serve.base}/api/version", headers=serve.auth()).status_code == 200
            page = http.get(f"{serve.base}/")
            assert page.status_code == 200 and "set-cookie" not in page.headers
        assert serve.stderr().count(f"{serve.base}/#code=") == 1
        assert serve.token not in serve.stderr()


def test_the_server_refuses_what_it_must_with_the_right_status_and_no_stack_trace(tmp_path, store_dir):
    # ALLOWED_HOSTS without a user-set token must not widen anything; a bad number is named, not obeyed.
    env = {"DSH_MEMORY_ALLOWED_HOSTS": "memory.example.com", "DSH_MEMORY_MAX_TOOL_CALLS": "lots"}
    with (
        running_serve(store_dir, tmp_path / "err.log", **env) as serve,
        httpx.Client(timeout=10) as http,
    ):
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        answers: list[httpx.Response] = []

        def check(response: httpx.Response, status: int) -> httpx.Response:
            assert response.status_code == status, (status, response.status_code, response.text)
            answers.append(response)
            return response

        # 401 without the bearer token, reads included; a wrong token is no token.
        no_auth = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        r = check(http.post(serve.url, json=init, headers=no_auth), 401)
        assert r.headers["www-authenticate"].startswith("Bearer")
        check(http.get(serve.url, headers=no_auth), 401)
        check(http.delete(serve.url, headers=no_auth), 401)
        check(http.post(serve.url, json=init, headers=no_auth | {"Authorization": "Bearer wrong"}), 401)
        check(http.get(f"{serve.base}/health"), 401)
        assert check(http.get(f"{serve.base}/health", headers=serve.auth()), 200).json()["name"] == "dsh-memory-mcp"

        # Host: loopback names on serve's own port pass, anything else is 421 (ALLOWED_HOSTS ignored
        # without a user token; a loopback name on another port came through someone else's listener).
        port = serve.url.split(":")[2].split("/")[0]
        sid = initialize(serve, http, Host=f"localhost:{port}")
        assert sid
        for host in ("evil.example", "memory.example.com", "127.0.0.1.evil.example", "localhost", "127.0.0.1:1"):
            check(http.post(serve.url, json=init, headers=serve.auth(Host=host)), 421)
        # Origin: our own passes, any other browser origin is 403.
        assert initialize(serve, http, Origin=f"http://127.0.0.1:{port}")
        check(http.post(serve.url, json=init, headers=serve.auth(Origin="http://evil.example")), 403)
        check(http.post(serve.url, json=init, headers=serve.auth(Origin="http://127.0.0.1:1")), 403)

        # Unknown session id: 404 (the client re-initializes), never 500.
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        check(http.post(serve.url, json=ping, headers=serve.auth(**{"mcp-session-id": "0" * 32})), 404)
        check(http.get(serve.url, headers=serve.auth(**{"mcp-session-id": "f" * 32})), 404)

        # Bodies are bounded: 413 before anything parses them, declared or streamed.
        big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + b"a" * (2 << 20) + b'"}}'
        check(http.post(serve.url, content=big, headers=serve.auth()), 413)

        def chunks() -> Any:
            for _ in range(40):
                yield b"a" * 65536

        check(http.post(serve.url, content=chunks(), headers=serve.auth()), 413)

        # Garbage gets a client error, not a crash.
        r = http.post(serve.url, content=b"{not json", headers=serve.auth())
        assert 400 <= r.status_code < 500
        answers.append(r)
        check(http.post(serve.url, json=init, headers=serve.auth(**{"X-DSH-Project": "relative/path"})), 400)
        check(http.post(serve.url, json=init, headers=serve.auth(**{"X-DSH-Project": "/%FF%FE"})), 400)
        check(http.get(f"{serve.base}/nothing-here", headers=serve.auth()), 404)
        assert all(no_stack(a.text) for a in answers)
        assert serve.proc.poll() is None
        assert serve.health()["toolCalls"]["limit"] == 16
    assert "Traceback" not in serve.stderr()
    assert (
        "DSH_MEMORY_MAX_TOOL_CALLS='lots'" in serve.stderr() and "只在设置了 DSH_MEMORY_TOKEN 时生效" in serve.stderr()
    )


def test_serve_json_is_private_one_per_store_replaces_a_stale_one_and_goes_at_exit(tmp_path, store_dir):
    store_dir.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = {"url": "http://127.0.0.1:9/mcp", "pid": dead.pid, "token": "old", "version": "0.0.1", "startedAt": 1}
    (store_dir / "serve.json").write_text(json.dumps(stale), encoding="utf-8")
    with running_serve(store_dir, tmp_path / "err.log") as serve:
        path = store_dir / "serve.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        info = json.loads(path.read_text(encoding="utf-8"))
        assert set(info) == {"url", "pid", "token", "version", "startedAt"}
        assert info["pid"] == serve.proc.pid and info["version"] == "0.1.0" and len(info["token"]) >= 32
        assert info["url"].startswith("http://127.0.0.1:") and info["url"].endswith("/mcp")
        assert abs(info["startedAt"] - time.time() * 1000) < 120_000
        assert f"pid {dead.pid}" in serve.stderr()  # the stale file was named and replaced

        second = subprocess.run(
            [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(store_dir), "--port", "0"],
            capture_output=True,
            text=True, encoding="utf-8",
            env=subprocess_env(),
            timeout=60,
        )
        assert second.returncode == 1, second.stderr
        assert f"pid {serve.proc.pid}" in second.stderr and serve.url in second.stderr
        assert "已经有一个 serve 在运行" in second.stderr
        assert json.loads(path.read_text(encoding="utf-8")) == info  # the first one's file is untouched

        assert serve.stop(signal.SIGTERM) == 0
        assert not path.exists()
    assert "收到退出信号,已停止" in serve.stderr()


def test_sigterm_lets_a_running_call_finish_then_exits_0(tmp_path, store_dir):
    store_dir.mkdir()
    holder = Worker("hold", str(store_dir), "global")
    try:
        holder.expect("locked")
        with running_serve(store_dir, tmp_path / "err.log") as serve, httpx.Client(timeout=30) as http:
            sid = initialize(serve, http)
            result: dict[str, Any] = {}

            def save() -> None:
                with httpx.Client(timeout=30) as own:
                    result.update(call_tool(serve, own, sid, "memory_save", {"content": "排干再退出"}))

            call = threading.Thread(target=save)
            call.start()
            until("the save waits for the held lock", lambda: serve.health()["toolCalls"]["running"] == 1)
            serve.proc.send_signal(signal.SIGTERM)
            # Once draining, a new call (on a connection that was already open) is not started.
            late = until(
                "a call is refused while draining",
                lambda: (r := call_tool(serve, http, sid, "memory_search", {"query": "x"}))["isError"] and r,
            )
            assert late["structuredContent"]["code"] == "BUSY" and "正在退出" in late["structuredContent"]["message"]
            holder.proc.kill()  # a dead holder's lock is broken at once: the save goes through
            holder.proc.wait(timeout=10)  # (a zombie still counts as alive)
            call.join(timeout=15)
            assert result.get("structuredContent", {}).get("ok") is True, result
            assert serve.proc.wait(timeout=15) == 0
        lines = (store_dir / "global.jsonl").read_text(encoding="utf-8").splitlines()
        assert [json.loads(x)["content"] for x in lines] == ["排干再退出"]
    finally:
        holder.proc.kill()
        holder.proc.wait(timeout=10)


def test_a_non_loopback_bind_needs_a_user_set_token(tmp_path, store_dir):
    refused = subprocess.run(
        [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(store_dir), "--host", "0.0.0.0"],
        capture_output=True,
        text=True, encoding="utf-8",
        env=subprocess_env(),
        timeout=60,
    )
    assert refused.returncode == 2, refused.stderr
    assert "DSH_MEMORY_TOKEN" in refused.stderr and "0.0.0.0" in refused.stderr
    assert not store_dir.exists()  # refused before touching the store

    token = "Tq8v-3kLm_P0x9ZrW2sYb7NcQ4dHj6Ue"  # 32 base64url characters: 192 bits
    env = {"DSH_MEMORY_TOKEN": token, "DSH_MEMORY_ALLOWED_HOSTS": "memory.example.com, other.example:8443"}
    with running_serve(store_dir, tmp_path / "err.log", "--host", "0.0.0.0", **env) as serve, httpx.Client() as http:
        assert serve.token == token
        port = serve.url.split(":")[2].split("/")[0]
        # A name the user listed bare stands for a reverse proxy in front: any port of it.
        for host in ("memory.example.com", "memory.example.com:443", "other.example:8443", f"localhost:{port}"):
            assert initialize(serve, http, Host=host)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        for host in ("evil.example", "other.example:1", "localhost:1"):
            assert http.post(serve.url, json=init, headers=serve.auth(Host=host)).status_code == 421


def test_a_lock_wait_ends_at_the_call_deadline_and_the_queue_is_first_come_first_served(tmp_path, store_dir):
    store_dir.mkdir()
    holder = Worker("hold", str(store_dir), "global")
    env = {"DSH_MEMORY_MAX_TOOL_CALLS": "1", "DSH_MEMORY_TOOL_DEADLINE_SECS": "2.5"}
    try:
        holder.expect("locked")
        with running_serve(store_dir, tmp_path / "err.log", **env) as serve, httpx.Client(timeout=30) as http:
            sid = initialize(serve, http)
            results: dict[str, Any] = {}
            done: dict[str, float] = {}
            start = time.monotonic()

            def run(name: str, tool: str, args: dict[str, Any]) -> None:
                with httpx.Client(timeout=30) as own:  # one client per thread
                    results[name] = call_tool(serve, own, sid, tool, args)
                done[name] = time.monotonic() - start

            slow = threading.Thread(target=run, args=("save", "memory_save", {"content": "等锁的保存"}))
            slow.start()
            until("the save holds the only slot", lambda: serve.health()["toolCalls"]["running"] == 1)
            queued = threading.Thread(target=run, args=("search", "memory_search", {"query": "x"}))
            queued.start()
            until("the search waits for the slot", lambda: serve.health()["toolCalls"]["queued"] == 1)
            assert serve.health()["toolCalls"] == {"running": 1, "queued": 1, "limit": 1, "deadlineSecs": 2.5}
            slow.join(timeout=20)
            queued.join(timeout=20)
        save, search = results["save"], results["search"]
        assert save["isError"] is True and save["structuredContent"]["code"] == "DEADLINE", save
        # The lock wait ended at the call's deadline (2.5 s), not at the lock's own 10 s; then the
        # queued search got the slot and ran within its own deadline.
        assert 2.0 < done["save"] < 6.5, done
        # (it waited for the slot the save held until 2.5 s: answered at about the same moment)
        assert search["isError"] is False and done["search"] > 2.0, (search, done)
        assert not (store_dir / "global.jsonl").exists()  # nothing was half-done
    finally:
        holder.proc.kill()
        holder.proc.wait(timeout=10)


def test_idle_and_never_initialized_sessions_are_reaped_but_a_running_call_is_not_idle(tmp_path, store_dir):
    store_dir.mkdir()
    env = {"DSH_MEMORY_SESSION_IDLE_SECS": "3", "DSH_MEMORY_SESSION_INIT_SECS": "0.5"}
    ping = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    with running_serve(store_dir, tmp_path / "err.log", **env) as serve, httpx.Client(timeout=30) as http:

        def ping_status(sid: str) -> int:
            headers = serve.auth(**{"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"})
            return http.post(serve.url, json=ping, headers=headers).status_code

        half = initialize(serve, http, notify=False)
        whole = initialize(serve, http)
        assert serve.health()["sessions"] == 2
        until("the half-open session is ended", lambda: serve.health()["sessions"] <= 1)
        assert ping_status(half) == 404  # never sent notifications/initialized: gone after 0.5 s
        assert ping_status(whole) == 200  # (a request: its 3 s start again)
        until("the idle session is ended", lambda: serve.health()["sessions"] == 0)
        assert ping_status(whole) == 404  # idle for longer than 3 s

        # A call that runs longer than the idle time keeps its session.
        busy = initialize(serve, http)
        holder = Worker("hold", str(store_dir), "global")
        try:
            holder.expect("locked")
            threading.Timer(4.5, lambda: (holder.proc.kill(), holder.proc.wait())).start()
            result = call_tool(serve, http, busy, "memory_save", {"content": "长调用不算空闲"})
        finally:
            holder.proc.kill()
            holder.proc.wait(timeout=10)
        assert result["structuredContent"]["ok"] is True
        assert ping_status(busy) == 200
    assert "Traceback" not in serve.stderr()


def test_many_sessions_do_not_grow_the_server_without_bound(tmp_path, store_dir):
    from tests.helpers.serve_proc import rss_kb

    env = {"DSH_MEMORY_SESSION_INIT_SECS": "0.5", "DSH_MEMORY_SESSION_IDLE_SECS": "2"}
    with running_serve(store_dir, tmp_path / "err.log", **env) as serve, httpx.Client(timeout=30) as http:

        def churn(n: int) -> None:
            for i in range(n):
                sid = initialize(serve, http, notify=i % 3 != 0)  # every third one is abandoned mid-handshake
                call_tool(serve, http, sid, "memory_search", {"query": "x"}) if i % 3 else None
                if i % 3 == 1:
                    http.delete(serve.url, headers=serve.auth(**{"mcp-session-id": sid}))

        churn(20)
        until("every session of the first round is gone", lambda: serve.health()["sessions"] == 0)
        warm = rss_kb(serve.proc.pid)
        churn(70)
        # Deleted, abandoned mid-handshake (0.5 s) and idle (2 s) sessions are all gone, and took their memory.
        until("every session is gone", lambda: serve.health()["sessions"] == 0)
        after = rss_kb(serve.proc.pid)
    print(f"RSS after 20 sessions {warm} KiB, after 90 {after} KiB")
    assert after - warm < 8_000, (warm, after)


def test_a_spawned_llama_server_is_stopped_when_serve_exits(tmp_path, store_dir):
    from tests.helpers.fake_llama import free_port
    from tests.helpers.fake_llama_exe import make_stand_in, read_spawns, wait_gone

    model = tmp_path / "m" / "All-MiniLM-L6-v2-Q8_0.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF")
    spawns = tmp_path / "spawns.jsonl"
    env = {
        "DSH_MEMORY_VECTOR": "on",
        "DSH_MEMORY_EMBED_EXE": str(make_stand_in(tmp_path / "bin")),
        "DSH_MEMORY_EMBED_MODEL": str(model),
        "DSH_MEMORY_EMBED_PORT": str(free_port()),
        "FAKE_LLAMA_ARGV_FILE": str(spawns),
        "FAKE_LLAMA_LOADING_S": "0.2",
    }
    with running_serve(store_dir, tmp_path / "err.log", **env) as serve:
        deadline = time.monotonic() + 20
        while not read_spawns(spawns) and time.monotonic() < deadline:
            time.sleep(0.1)
        pids = [s["pid"] for s in read_spawns(spawns)]
        assert len(pids) == 1, serve.stderr()
        assert serve.stop(signal.SIGINT) == 0
    assert wait_gone(pids[0], 10), "llama-server outlived serve"


def test_serve_refuses_a_port_in_use_with_a_diagnostic(tmp_path, store_dir):
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        port = sock.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(store_dir), "--port", str(port)],
            capture_output=True,
            text=True, encoding="utf-8",
            env=subprocess_env(),
            timeout=60,
        )
    finally:
        sock.close()
    assert out.returncode == 1, out.stderr
    assert "端口已被占用" in out.stderr and str(port) in out.stderr
    assert not (store_dir / "serve.json").exists()
    assert "Traceback" not in out.stderr


def test_a_relayed_stdio_host_in_a_chinese_named_project_saves_into_that_project(tmp_path, store_dir):
    from tests.helpers.mcp_session import server_params, stdio_session

    project = tmp_path / "我的项目"
    project.mkdir()
    with running_serve(store_dir, tmp_path / "serve.log") as serve:
        params = server_params(store_dir, cwd=project)
        with stdio_session(params, tmp_path / "relay.log") as host:
            saved = host.call("memory_save", {"content": "中文路径也能转发", "scope": "project"})
        assert "连接方式 = relay(" in (tmp_path / "relay.log").read_text(encoding="utf-8")
        assert saved.structured_content["scope"] == f"project:{project}", saved
        with httpx.Client(timeout=10) as http:
            sid = initialize(serve, http)
            found = call_tool(serve, http, sid, "memory_search", {"query": "中文路径", "path": str(project)})
        assert [r["content"] for r in found["structuredContent"]["records"]] == ["中文路径也能转发"]


def test_the_typescript_sdk_client_works_over_streamable_http_with_the_bearer_token(tmp_path, store_dir):
    from tests.helpers.ts_client import drive, http_target, require_ts_client

    require_ts_client()
    with running_serve(store_dir, tmp_path / "err.log") as serve:
        steps = [
            {"op": "listTools"},
            {"op": "call", "name": "memory_save", "arguments": {"content": "TypeScript 客户端经 HTTP 保存"}},
            {"op": "call", "name": "memory_search", "arguments": {"query": "TypeScript 客户端"}},
            {"op": "call", "name": "memory_get", "arguments": {"ids": []}},
        ]
        auth = {"Authorization": f"Bearer {serve.token}"}
        out = drive(http_target(serve.url, auth), steps, workdir=tmp_path / "ts")
        assert out["serverVersion"]["name"] == "dsh-memory-mcp"
        listed, saved, found, bad = (step.get("result", step) for step in out["steps"])
        assert {t["name"] for t in listed["tools"]} >= {"memory_save", "memory_search"}
        assert saved["structuredContent"]["ok"] is True, saved
        assert [r["content"] for r in found["structuredContent"]["records"]] == ["TypeScript 客户端经 HTTP 保存"]
        assert bad["isError"] is True and bad["structuredContent"]["code"] == "IDS_EMPTY"  # validated by Ajv too

        # Without the token the SDK's transport is refused at the first request.
        with pytest.raises(AssertionError, match=r"401|Unauthorized|invalid_token"):
            drive(http_target(serve.url), [{"op": "listTools"}], workdir=tmp_path / "ts-noauth")
