"""A relay in front of a `serve` that misbehaves answers every request, and passes on only whole JSON-RPC.

The `serve` here is a small real HTTP server (`tests/helpers/fake_serve.py`) that answers the
handshake properly and then does one bad thing with a `tools/call`: cuts an SSE event in the middle,
sends garbage, a 100 MB event, a response with a wrong id, resets the connection, or never answers.
The host is a real process speaking raw JSON-RPC lines to a real relay (`python -m dsh_memory_mcp`),
so every byte it receives is checked. When the relay gives up on serve, its direct child (a real
`--no-relay` server on the same store) does the call: the answer is a real save.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.fake_serve import SSE_HEAD, FakeServe, Handler
from tests.helpers.raw_host import RawHost
from tests.helpers.serve_proc import rss_kb

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX relay lifecycle"),
]

SAVE = {"name": "memory_save", "arguments": {"content": "中继故障测试:这一条要保存且只保存一次"}}


def _save(ident: int = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": SAVE}


def _records(store_dir: Path) -> list[str]:
    path = store_dir / "global.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["content"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _torn(h: Handler, m: dict[str, Any]) -> None:
    h.head(200, SSE_HEAD)
    h.raw(b'event: message\r\ndata: {"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","te' % m["id"])


def _garbage(h: Handler, m: dict[str, Any]) -> None:
    h.head(200, SSE_HEAD)
    h.event("<html>502 Bad Gateway</html>")


def _json_garbage(h: Handler, m: dict[str, Any]) -> None:
    h.head(200, {"Content-Type": "application/json"})
    h.raw(b"not json at all")


def _ends_without_answer(h: Handler, m: dict[str, Any]) -> None:
    h.head(200, SSE_HEAD)
    h.raw(b": ping\r\n\r\n")
    h.event({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "working"}})


def _reset(h: Handler, m: dict[str, Any]) -> None:
    h.reset()


def _oversize(h: Handler, m: dict[str, Any]) -> None:
    h.head(200, SSE_HEAD)
    h.raw(b'event: message\r\ndata: {"jsonrpc":"2.0","id":%d,"result":{"x":"' % m["id"])
    chunk = b"x" * (1 << 20)
    for _ in range(100):  # a 100 MB event; the relay must stop reading long before its end
        h.raw(chunk)
    h.raw(b'"}}\r\n\r\n')


@pytest.mark.parametrize(
    "scenario",
    [_torn, _garbage, _json_garbage, _ends_without_answer, _reset, _oversize],
    ids=["torn-sse-event", "garbage-event", "garbage-json-body", "stream-ends-without-answer", "reset", "100mb-event"],
)
def test_a_call_serve_botches_is_answered_once_by_the_direct_fallback_and_nothing_torn_reaches_the_host(
    tmp_path: Path, store_dir: Path, scenario: Any
):
    with FakeServe(store_dir, scenario), RawHost(store_dir, tmp_path / "relay.log") as host:
        host.initialize()
        host.send(_save())
        answer = host.wait_for(lambda m: m.get("id") == 7)
        peak_kb = _peak_kb(host.proc.pid)
        assert host.close() == 0
    assert "连接方式 = relay(" in host.stderr()
    assert "改为直连模式" in host.stderr(), host.stderr()
    assert answer["result"]["structuredContent"]["ok"] is True, answer  # a real save, by the direct child
    messages = host.messages()  # every line the host got is one whole JSON-RPC object
    assert [m["id"] for m in messages if "id" in m and "method" not in m] == [0, 7]
    assert _records(store_dir) == [SAVE["arguments"]["content"]]
    if scenario is _oversize:
        assert peak_kb < 150_000, peak_kb  # the relay held at most its 16 MiB bound, not the 100 MB event


def _peak_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return rss_kb(pid)


def _multi_line(h: Handler, m: dict[str, Any]) -> None:
    h.head(200, SSE_HEAD)
    answer = {"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "分行的应答"}]}}
    h.event(json.dumps(answer, ensure_ascii=False, indent=2))


def test_json_spread_over_several_sse_data_lines_reaches_the_host_as_one_line(tmp_path: Path, store_dir: Path):
    with FakeServe(store_dir, _multi_line), RawHost(store_dir, tmp_path / "relay.log") as host:
        host.initialize()
        host.send(_save())
        answer = host.wait_for(lambda m: m.get("id") == 7)
        assert host.close() == 0
    assert answer["result"]["content"][0]["text"] == "分行的应答"
    assert "改为直连模式" not in host.stderr()
    assert len(host.lines) == 2 and all(b"\n" not in line for line in host.lines)


def _wrong_ids(h: Handler, m: dict[str, Any]) -> None:
    h.head(200, SSE_HEAD)
    h.event({"jsonrpc": "2.0", "id": 999, "result": {"content": []}})  # an id the host never sent
    h.event({"jsonrpc": "2.0", "id": 0, "result": {"content": []}})  # an id already answered (initialize)
    h.event({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    h.event(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "nobody", "progress": 1}}
    )
    h.event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p-7", "progress": 1}})
    h.event({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "对的应答"}]}})


def test_answers_for_ids_the_host_did_not_send_and_stray_notifications_never_reach_it(tmp_path: Path, store_dir: Path):
    call = _save() | {"params": SAVE | {"_meta": {"progressToken": "p-7"}}}
    with FakeServe(store_dir, _wrong_ids), RawHost(store_dir, tmp_path / "relay.log") as host:
        host.initialize()
        host.send(call)
        answer = host.wait_for(lambda m: m.get("id") == 7)
        assert host.close() == 0
    assert answer["result"]["content"][0]["text"] == "对的应答"
    got = host.messages()
    assert [m.get("id") for m in got] == [0, None, 7]  # initialize, the host's own progress token, the answer
    assert got[1]["params"]["progressToken"] == "p-7"
    assert "改为直连模式" not in host.stderr()
    assert "不属于任何在途请求的应答" in host.stderr()


def _timed_save(tmp_path: Path, fake: FakeServe, after_handshake: Any = None) -> tuple[dict[str, Any], float, RawHost]:
    """One relayed save against `fake`: its answer, how long it took, the host (closed)."""
    with fake, RawHost(fake.store_dir, tmp_path / "relay.log") as host:
        host.initialize()
        if after_handshake is not None:
            after_handshake.set()
        started = time.monotonic()
        host.send(_save())
        answer = host.wait_for(lambda m: m.get("id") == 7, timeout=90)
        waited = time.monotonic() - started
        assert host.close() == 0
    return answer, waited, host


def _silent(h: Handler, m: dict[str, Any]) -> None:
    h.head(200, SSE_HEAD)
    h.server.release.wait(120)


def test_a_call_serve_never_answers_while_its_health_does_is_given_up_at_its_deadline_plus_the_grace(
    tmp_path: Path, store_dir: Path
):
    from dsh_memory_mcp.transports.relay import CALL_GRACE

    answer, waited, host = _timed_save(tmp_path, FakeServe(store_dir, _silent, deadline=0.5))
    assert answer["result"]["structuredContent"]["ok"] is True
    assert "截止时间" in host.stderr() and "改为直连模式" in host.stderr()
    assert 0.5 + CALL_GRACE - 1 < waited < 0.5 + CALL_GRACE + 20, waited


def test_an_over_long_host_line_gets_an_error_and_the_relay_goes_on(tmp_path: Path, store_dir: Path):
    def answer(h: Handler, m: dict[str, Any]) -> None:
        h.json_answer({"jsonrpc": "2.0", "id": m["id"], "result": {"content": []}})

    with FakeServe(store_dir, answer) as fake, RawHost(store_dir, tmp_path / "relay.log") as host:
        host.initialize()
        host.send(b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"x":"' + b"y" * (9 << 20) + b'"}}')
        refused = host.wait_for(lambda m: "error" in m)
        host.send(_save(8))
        assert host.wait_for(lambda m: m.get("id") == 8)["result"] == {"content": []}
        assert host.close() == 0
    assert refused["error"]["code"] == -32600
    assert all(len(json.dumps(m)) < 1 << 20 for _, m in fake.seen)  # the long line never went to serve


def test_a_wedged_serve_whose_health_stops_answering_is_given_up_after_a_few_checks(tmp_path: Path, store_dir: Path):
    from dsh_memory_mcp.transports.relay import LIVENESS_AFTER, LIVENESS_EVERY, LIVENESS_FAILURES, LIVENESS_TIMEOUT

    fake = FakeServe(store_dir, _silent)
    answer, waited, host = _timed_save(tmp_path, fake, fake.server.health_hangs)  # alive, accepting, mute
    assert answer["result"]["structuredContent"]["ok"] is True
    assert "/health 没有应答" in host.stderr() and "改为直连模式" in host.stderr()
    noticed = LIVENESS_AFTER + LIVENESS_FAILURES * (LIVENESS_TIMEOUT + LIVENESS_EVERY) + LIVENESS_EVERY
    assert waited < noticed + 20, waited  # the checks, then the direct child's cold start and the save


def test_a_call_the_host_cancels_gets_no_answer_and_costs_no_fallback(tmp_path: Path, store_dir: Path):
    with FakeServe(store_dir, _silent) as fake, RawHost(store_dir, tmp_path / "relay.log") as host:
        host.initialize()
        host.send(_save())
        deadline = time.monotonic() + 30
        while not any(m.get("method") == "tools/call" for _, m in fake.seen) and time.monotonic() < deadline:
            time.sleep(0.02)
        host.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
        host.send({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {}})
        assert host.wait_for(lambda m: m.get("id") == 8)["result"] == {}
        started = time.monotonic()
        assert host.close() == 0
        closed_in = time.monotonic() - started
    assert [m.get("id") for m in host.messages()] == [0, 8]  # nothing for the cancelled 7
    assert "改为直连模式" not in host.stderr()
    assert closed_in < 20, closed_in  # the drain does not wait for a call the host gave up on
    cancels = [m for _, m in fake.seen if m.get("method") == "notifications/cancelled"]
    assert cancels and cancels[0]["params"]["requestId"] == 7  # serve was told too (it has a session)


def test_a_2026_request_goes_to_serve_with_its_routing_headers_and_no_session(tmp_path: Path, store_dir: Path):
    def answer(h: Handler, m: dict[str, Any]) -> None:
        h.json_answer({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [], "resultType": "complete"}})

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    call = {"jsonrpc": "2.0", "id": "m1", "method": "tools/call", "params": SAVE | {"name": "记忆", "_meta": meta}}
    with FakeServe(store_dir, answer) as fake, RawHost(store_dir, tmp_path / "relay.log") as host:
        host.send(call)  # no initialize: the per-request era has none
        assert host.wait_for(lambda m: m.get("id") == "m1")["result"]["resultType"] == "complete"
        host.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "gone"}})
        assert host.close() == 0
    (headers, _), *rest = fake.seen
    lower = {k.lower(): v for k, v in headers.items()}
    assert lower["mcp-protocol-version"] == "2026-07-28" and lower["mcp-method"] == "tools/call"
    assert lower["mcp-name"] == "=?base64?6K6w5b+G?="  # "记忆", as the SDK encodes a non-ASCII name
    assert "mcp-session-id" not in lower
    assert rest == []  # a cancel for a request not in flight, with no session, is not posted


def _slow_big(h: Handler, m: dict[str, Any]) -> None:
    time.sleep(1.0)  # the host dies meanwhile
    h.head(200, SSE_HEAD)
    text = "迟到的大应答 " * 20_000
    h.event({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": text}]}})


def test_a_relay_whose_host_dies_mid_call_exits_0_quietly(tmp_path: Path, store_dir: Path):
    import os
    import subprocess

    from tests.conftest import PYTHON, subprocess_env

    with FakeServe(store_dir, _slow_big):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        proc = subprocess.Popen(
            [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(store_dir)],
            stdin=subprocess.PIPE,
            stdout=out_w,
            stderr=err_w,
            env=subprocess_env(),
        )
        os.close(out_w)
        os.close(err_w)
        assert proc.stdin is not None
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "h", "version": "1"},
            },
        }
        proc.stdin.write(json.dumps(init).encode() + b"\n")
        proc.stdin.flush()
        assert b'"id":0' in os.read(out_r, 1 << 16).replace(b" ", b"")
        proc.stdin.write(
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n' + json.dumps(_save()).encode() + b"\n"
        )
        proc.stdin.flush()
        time.sleep(0.3)
        # The host goes away mid-call: every pipe to it closes at once.
        os.close(out_r)
        os.close(err_r)
        proc.stdin.close()
        code = proc.wait(timeout=60)
    assert code == 0
