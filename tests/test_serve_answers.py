"""How `serve` answers a POST (one JSON body, or an SSE stream only where a call may need to ask the
client something), and the relay keeping its connection to serve between calls.

A real `serve` on loopback with the official client and raw HTTP; the relay is a real
`python -m dsh_memory_mcp` driven with raw JSON-RPC lines, in front of the real serve or of a small
real HTTP server (`tests/helpers/fake_serve.py`) that closes each kept connection behind its back.
"""

from __future__ import annotations

import json
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from dsh_memory_mcp.transports.http import answers_json
from tests.helpers.fake_serve import FakeServe, Handler
from tests.helpers.raw_host import RawHost
from tests.helpers.serve_proc import Serve, running_serve

PROJECT = b"x-dsh-project"
SOURCE = b"x-dsh-project-source"


def _init(capabilities: dict[str, Any]) -> bytes:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "t", "version": "1"},
    }
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).encode()


@pytest.mark.parametrize(
    ("body", "headers", "roots_matter", "expected"),
    [
        (_init({}), {}, True, True),  # no roots: nothing to ask
        (_init({"roots": {}}), {}, True, False),  # its roots name the project: asked on the call's stream
        (_init({"roots": {}}), {PROJECT: b"/w/a", SOURCE: b"flag"}, True, True),  # a relay's own project
        (_init({"roots": {}}), {PROJECT: b"/w/a"}, True, True),
        (_init({"roots": {}}), {PROJECT: b"/w/a", SOURCE: b" CWD "}, True, False),  # the relay only knew its cwd
        (_init({"roots": {}}), {}, False, True),  # serve's own --project: roots never asked
        (b"{not json", {}, True, False),  # not readable: the SDK's default
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', {}, True, False),
        (None, {}, True, False),  # larger than the body limit
    ],
)
def test_a_session_is_answered_with_json_unless_a_call_may_have_to_ask_the_client_for_its_roots(
    body: bytes | None, headers: dict[bytes, bytes], roots_matter: bool, expected: bool
) -> None:
    assert answers_json(body, headers, roots_matter=roots_matter) is expected


def _accepted(serve: Serve) -> int:
    return int(serve.health()["connections"]["accepted"])


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX serve lifecycle")
def test_the_official_clients_calls_get_json_answers_and_share_one_connection(tmp_path: Path, store_dir: Path) -> None:
    with running_serve(store_dir, tmp_path / "err.log") as serve:

        async def scenario() -> tuple[int, list[bool]]:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {serve.token}"}) as http,
                streamable_http_client(serve.url, http_client=http) as (read, write, *_),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                before = _accepted(serve)
                oks = []
                for i in range(12):
                    if i % 2:
                        result = await session.call_tool("memory_search", {"query": "连接复用"})
                    else:
                        result = await session.call_tool("memory_save", {"content": f"连接复用测试第 {i} 条"})
                    oks.append(bool((result.structured_content or {}).get("ok")))
                return _accepted(serve) - before - 1, oks  # the last /health is a connection of its own

        new_connections, oks = anyio.run(scenario)
    assert oks == [True] * 12
    # An SSE answer made the client open a new connection for each call (12); JSON bodies are read
    # to their end, so the calls reuse the connection they have.
    assert new_connections <= 2, new_connections


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX serve lifecycle")
def test_a_session_whose_roots_decide_the_project_keeps_the_sse_stream_others_get_json(
    tmp_path: Path, store_dir: Path
) -> None:
    project = tmp_path / "项目"
    project.mkdir()
    relayed = {"X-DSH-Project": urllib.parse.quote(str(project), safe="/"), "X-DSH-Project-Source": "flag"}
    with running_serve(store_dir, tmp_path / "err.log") as serve, httpx.Client(timeout=20) as http:

        def answer_types(capabilities: dict[str, Any], **headers: str) -> tuple[str, str]:
            r = http.post(serve.url, content=_init(capabilities), headers=serve.auth(**headers))
            assert r.status_code == 200, r.text
            session = serve.auth(**headers, **{"mcp-session-id": r.headers["mcp-session-id"]})
            session["mcp-protocol-version"] = "2025-11-25"
            note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
            assert http.post(serve.url, content=note, headers=session).status_code == 202
            listed = b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
            answer = http.post(serve.url, content=listed, headers=session)
            assert answer.status_code == 200 and b"memory_save" in answer.content
            return r.headers["content-type"].split(";")[0], answer.headers["content-type"].split(";")[0]

        assert answer_types({}) == ("application/json", "application/json")
        assert answer_types({"roots": {}}, **relayed) == ("application/json", "application/json")
        # Its first tool call asks for its roots on that call's own stream (tests/test_eras.py).
        assert answer_types({"roots": {}}) == ("text/event-stream", "text/event-stream")


def _json_then_close(h: Handler, m: dict[str, Any]) -> None:
    """Answer as a kept-alive HTTP/1.1 connection would (length, no `Connection: close`), then close
    it anyway — what serve does to a connection the moment its keep-alive time runs out."""
    h.protocol_version = "HTTP/1.1"
    content = [{"type": "text", "text": f"已保存 {m['id']}"}]
    h.json_answer({"jsonrpc": "2.0", "id": m["id"], "result": {"content": content, "structuredContent": {"ok": True}}})
    h.close_connection = True


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX relay lifecycle")
def test_a_kept_connection_serve_closed_is_replaced_and_each_call_reaches_serve_exactly_once(
    tmp_path: Path, store_dir: Path
) -> None:
    with FakeServe(store_dir, _json_then_close) as fake, RawHost(store_dir, tmp_path / "relay.log") as host:
        host.initialize()
        answers = []
        for ident in (7, 8, 9, 10):
            host.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": "memory_list"}})
            answers.append(host.wait_for(lambda m, i=ident: m.get("id") == i))
        assert host.close() == 0
    assert [a["result"]["content"][0]["text"] for a in answers] == [f"已保存 {i}" for i in (7, 8, 9, 10)]
    calls = [m["id"] for _, m in fake.seen if m.get("method") == "tools/call"]
    assert calls == [7, 8, 9, 10]  # none lost with the closed connection, none sent twice
    assert "改为直连模式" not in host.stderr(), host.stderr()  # never taken for a serve that failed


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX relay lifecycle")
def test_a_relayed_host_keeps_one_connection_to_serve_for_its_calls(tmp_path: Path, store_dir: Path) -> None:
    project = tmp_path / "app"
    project.mkdir()
    with (
        running_serve(store_dir, tmp_path / "err.log") as serve,
        RawHost(store_dir, tmp_path / "relay.log", "--project", str(project)) as host,
    ):
        host.initialize()
        host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        before = _accepted(serve)
        for ident in range(1, 13):
            name, args = ("memory_save", {"content": f"中继连接第 {ident} 次"}) if ident % 2 else ("memory_list", {})
            host.send(
                {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": name, "arguments": args}}
            )
            answer = host.wait_for(lambda m, i=ident: m.get("id") == i)
            assert answer["result"]["structuredContent"]["ok"] is True, answer
        new_connections = _accepted(serve) - before - 1
        assert host.close() == 0
    assert new_connections <= 1, new_connections  # was one per call


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX relay lifecycle")
def test_a_relayed_host_whose_roots_decide_the_project_keeps_its_connection_across_sse_answers(
    tmp_path: Path, store_dir: Path
) -> None:
    project = tmp_path / "根目录项目"
    project.mkdir()
    with (
        running_serve(store_dir, tmp_path / "err.log") as serve,
        RawHost(store_dir, tmp_path / "relay.log") as host,  # no --project: the host's roots decide
    ):
        host.initialize({"roots": {"listChanged": True}})
        host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        save = {"name": "memory_save", "arguments": {"content": "根目录决定项目", "scope": "project"}}
        host.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": save})
        asked = host.wait_for(lambda m: m.get("method") == "roots/list")
        roots = {"roots": [{"uri": project.as_uri(), "name": "p"}]}
        host.send({"jsonrpc": "2.0", "id": asked["id"], "result": roots})
        first = host.wait_for(lambda m: m.get("id") == 1)
        assert first["result"]["structuredContent"]["scope"] == f"project:{project}", first
        before = _accepted(serve)
        for ident in range(2, 12):
            host.send({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": {"name": "memory_list"}})
            answer = host.wait_for(lambda m, i=ident: m.get("id") == i)
            assert answer["result"]["structuredContent"]["ok"] is True, answer
        new_connections = _accepted(serve) - before - 1
        assert host.close() == 0
    assert new_connections <= 1, new_connections  # each SSE answer is read to its end, the connection kept
