"""The relay for real: a `serve` process, stdio hosts spawned as IDEs spawn them, the official client.

A plain stdio start with a live `serve` on the same store relays (it never opens the store); with
no serve, a dead one, `--no-relay` or `DSH_MEMORY_RELAY=off` it runs directly. If `serve` dies in
the middle of a session, the host's next call still succeeds through a direct fallback.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import subprocess_env
from tests.helpers.mcp_session import server_params, stdio_session
from tests.helpers.serve_proc import running_serve

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX serve lifecycle"),
]


def _lines(store_dir: Path) -> list[dict[str, Any]]:
    path = store_dir / "global.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def test_a_stdio_host_is_relayed_to_serve_and_sees_its_tools_and_store(tmp_path: Path, store_dir: Path):
    with running_serve(store_dir, tmp_path / "serve.log") as serve:
        errlog = tmp_path / "host.log"
        with stdio_session(server_params(store_dir), errlog) as host:
            tools = sorted(t.name for t in host.list_tools().tools)
            saved = host.call("memory_save", {"content": "经 relay 保存:部署前先跑 make check"})
            assert not saved.is_error, _text(saved)
            found = host.call("memory_search", {"query": "部署 make check"})
            assert found.structured_content["count"] == 1
        log = errlog.read_text(encoding="utf-8")
        assert f"连接方式 = relay({serve.url})" in log
        assert "memory_save" in tools and "memory_forget" in tools
        # The relay process never opened the store itself: serve wrote the line.
        assert [r["content"] for r in _lines(store_dir)] == ["经 relay 保存:部署前先跑 make check"]


def test_without_serve_or_with_no_relay_the_start_is_direct_and_says_why(tmp_path: Path, store_dir: Path):
    with stdio_session(server_params(store_dir), tmp_path / "a.log") as host:
        assert not host.call("memory_list", {}).is_error
    assert "连接方式 = direct(没有运行中的 serve)" in (tmp_path / "a.log").read_text(encoding="utf-8")
    with running_serve(store_dir, tmp_path / "serve.log"):
        params = server_params(store_dir)
        params.args.append("--no-relay")
        with stdio_session(params, tmp_path / "b.log") as host:
            assert not host.call("memory_save", {"content": "直连保存的一条"}).is_error
        with stdio_session(server_params(store_dir, DSH_MEMORY_RELAY="off"), tmp_path / "c.log") as host:
            assert host.call("memory_search", {"query": "直连保存"}).structured_content["count"] == 1
    assert "连接方式 = direct(--no-relay)" in (tmp_path / "b.log").read_text(encoding="utf-8")
    assert "连接方式 = direct(DSH_MEMORY_RELAY=off)" in (tmp_path / "c.log").read_text(encoding="utf-8")


def test_the_relay_forwards_the_hosts_project(tmp_path: Path, store_dir: Path):
    project = tmp_path / "工作区" / "app"
    project.mkdir(parents=True)
    with (
        running_serve(store_dir, tmp_path / "serve.log"),
        stdio_session(server_params(store_dir, project=project), tmp_path / "host.log") as host,
    ):
        saved = host.call("memory_save", {"content": "这个项目用 pnpm", "scope": "project"})
        assert not saved.is_error, _text(saved)
        assert saved.structured_content["scope"] == f"project:{project.as_posix()}"


def test_two_relayed_hosts_and_an_http_client_writing_at_once_lose_nothing(tmp_path: Path, store_dir: Path):
    import anyio
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    per_writer = 15
    with running_serve(store_dir, tmp_path / "serve.log") as serve:
        errors: list[str] = []

        def stdio_writer(name: str) -> None:
            try:
                with stdio_session(server_params(store_dir), tmp_path / f"{name}.log") as host:
                    for i in range(per_writer):
                        r = host.call("memory_save", {"content": f"{name} 第 {i} 条记忆"})
                        if r.is_error:
                            errors.append(_text(r))
                    seen = host.call("memory_list", {"limit": 200}).structured_content["total"]
                    assert seen >= per_writer
            except Exception as exc:  # reported below, with the others
                errors.append(f"{name}: {exc!r}")

        async def http_writer() -> None:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {serve.token}"}) as http,
                streamable_http_client(serve.url, http_client=http) as (read, write, *_),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                for i in range(per_writer):
                    r = await session.call_tool("memory_save", {"content": f"http 第 {i} 条记忆"})
                    if r.is_error:
                        errors.append(str(r.content))

        threads = [threading.Thread(target=stdio_writer, args=(n,)) for n in ("hostA", "hostB")]
        for t in threads:
            t.start()
        anyio.run(http_writer)
        for t in threads:
            t.join(120)
        assert errors == []
        # Each writer's saves are visible to the others: one more relayed host reads them all.
        with stdio_session(server_params(store_dir), tmp_path / "reader.log") as reader:
            listed = reader.call("memory_list", {"limit": 200}).structured_content
    contents = [r["content"] for r in _lines(store_dir)]
    expected = {f"{w} 第 {i} 条记忆" for w in ("hostA", "hostB", "http") for i in range(per_writer)}
    assert sorted(contents) == sorted(expected)  # every save exactly once
    assert listed["total"] == len(expected)


def test_when_serve_is_killed_mid_session_the_hosts_next_call_still_succeeds(tmp_path: Path, store_dir: Path):
    errlog = tmp_path / "host.log"
    with (
        running_serve(store_dir, tmp_path / "serve.log") as serve,
        stdio_session(server_params(store_dir), errlog) as host,
    ):
        assert not host.call("memory_save", {"content": "serve 还活着时保存的"}).is_error
        serve.proc.send_signal(signal.SIGKILL)
        serve.proc.wait(10)
        after = host.call("memory_save", {"content": "serve 被杀之后保存的"})
        assert not after.is_error, _text(after)
        found = host.call("memory_search", {"query": "保存"}).structured_content
        assert found["count"] == 2
        # Tools are still listed (the direct fallback answers everything).
        assert "memory_get" in {t.name for t in host.list_tools().tools}
    assert "改为直连模式" in errlog.read_text(encoding="utf-8")
    assert sorted(r["content"] for r in _lines(store_dir)) == ["serve 被杀之后保存的", "serve 还活着时保存的"]


def test_a_restarted_serve_gets_a_new_session_and_the_hosts_call_succeeds(tmp_path: Path, store_dir: Path):
    """serve restarted on the same port and token (an upgrade, a login item): our session id is
    unknown to it (404), so the relay opens a new session and sends the call again."""
    import socket

    from tests.helpers.serve_proc import wait_listening

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = subprocess_env(DSH_MEMORY_TOKEN="relay-test-token-0123456789")
    cmd = [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(store_dir), "--port", str(port)]

    def start(log: Path) -> subprocess.Popen[str]:
        with log.open("w", encoding="utf-8") as err:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env, text=True, encoding="utf-8"
            )
        wait_listening(proc, store_dir, log)
        return proc

    errlog = tmp_path / "host.log"
    first = start(tmp_path / "serve1.log")
    second: subprocess.Popen[str] | None = None
    try:
        with stdio_session(server_params(store_dir), errlog) as host:
            assert not host.call("memory_save", {"content": "重启前保存的"}).is_error
            first.send_signal(signal.SIGTERM)
            assert first.wait(20) == 0
            second = start(tmp_path / "serve2.log")
            after = host.call("memory_save", {"content": "重启后保存的"})
            assert not after.is_error, _text(after)
            assert host.call("memory_search", {"query": "保存"}).structured_content["count"] == 2
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
    log = errlog.read_text(encoding="utf-8")
    assert "重新建立会话" in log and "改为直连模式" not in log
    assert sorted(r["content"] for r in _lines(store_dir)) == ["重启前保存的", "重启后保存的"]


def test_a_relayed_host_gets_an_answer_for_every_line(tmp_path: Path, store_dir: Path):
    """The relay has no SDK: it answers lines that are not JSON-RPC itself, and serve's HTTP errors
    for a request become a JSON-RPC error carrying the request's id."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    lines = [
        json.dumps(init),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        "garbage",
        "{",
        json.dumps([{"jsonrpc": "2.0", "id": 5, "method": "ping"}]),
        json.dumps({"jsonrpc": "1.0", "id": 6, "method": "ping"}),
        json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
    ]
    with running_serve(store_dir, tmp_path / "serve.log"):
        proc = subprocess.run(
            [sys.executable, "-m", "dsh_memory_mcp", "--store-dir", str(store_dir)],
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True, encoding="utf-8",
            env=subprocess_env(),
            timeout=60,
        )
    assert "连接方式 = relay(" in proc.stderr
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    by_id = {a.get("id"): a for a in answers}
    assert by_id[1]["result"]["serverInfo"]["name"]
    assert by_id[6]["error"]["code"] == -32600
    assert by_id[7]["result"] == {}
    nulls = [a["error"]["code"] for a in answers if a.get("id") is None]
    assert sorted(nulls) == [-32700, -32700, -32600]
    assert proc.returncode == 0
