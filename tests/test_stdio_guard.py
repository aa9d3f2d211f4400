"""Every input line gets a JSON-RPC answer, over a real `python -m dsh_memory_mcp` and raw pipes.

The SDK's stdio transport dropped each of these shapes without a word (the host then waits for
its own timeout); `transports/stdio_guard.py` answers them. Each test sends one raw line, reads
the answer, and checks that the same server still answers a ping afterwards.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import subprocess_env

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


class RawServer:
    """A spawned server spoken to in raw JSON-RPC lines (no client library in between)."""

    def __init__(self, store: Path, log_dir: Path, **env: str) -> None:
        self.stderr_path = log_dir / "stderr.log"
        self._err = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_memory_mcp", "--store-dir", str(store), "--project", str(log_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env=subprocess_env(**env),
        )
        self._buffer = b""
        self._next_id = 1000
        init = self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        )
        assert "result" in init, init
        self.send_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def send_line(self, line: str | bytes) -> None:
        data = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def read_message(self, timeout: float = 10.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"no answer within {timeout} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise AssertionError("server closed stdout")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send_line(json.dumps(message, ensure_ascii=False))
        answer = self.read_message()
        assert answer.get("id") == self._next_id, answer
        return answer

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def assert_alive(self) -> None:
        assert self.request("ping") == {"jsonrpc": "2.0", "id": self._next_id, "result": {}}
        assert self.proc.poll() is None

    def close(self) -> int:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._err.close()
            if self.proc.stdout is not None:
                self.proc.stdout.close()


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    root = tmp_path_factory.mktemp("raw")
    server = RawServer(root / "store", root, DSH_MEMORY_VECTOR="off", XDG_STATE_HOME=str(root / "state"))
    try:
        yield server
    finally:
        assert server.close() == 0


def _ask(server: RawServer, line: str | bytes) -> dict[str, Any]:
    server.send_line(line)
    answer = server.read_message()
    server.assert_alive()
    assert answer["jsonrpc"] == "2.0" and "result" not in answer, answer
    return answer


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_a_line_that_is_not_json_gets_a_parse_error_with_a_null_id(raw_server):
    answer = _ask(raw_server, "garbage")
    assert answer["id"] is None and answer["error"]["code"] == PARSE_ERROR


def test_a_truncated_object_gets_a_parse_error(raw_server):
    answer = _ask(raw_server, "{")
    assert answer["id"] is None and answer["error"]["code"] == PARSE_ERROR


def test_bytes_that_are_not_utf8_get_a_parse_error(raw_server):
    answer = _ask(raw_server, b"\xff\xfe\x00garbage")
    assert answer["id"] is None and answer["error"]["code"] == PARSE_ERROR


def test_a_batch_array_gets_an_invalid_request_error(raw_server):
    answer = _ask(raw_server, '[{"jsonrpc":"2.0","id":5,"method":"ping"}]')
    assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST
    assert "批量" in answer["error"]["message"]


def test_a_json_rpc_1_0_request_gets_an_invalid_request_error_with_its_id(raw_server):
    answer = _ask(raw_server, '{"jsonrpc":"1.0","id":6,"method":"ping"}')
    assert answer["id"] == 6 and answer["error"]["code"] == INVALID_REQUEST


def test_json_that_is_not_an_object_gets_an_invalid_request_error(raw_server):
    answer = _ask(raw_server, "42")
    assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST


def test_an_object_id_gets_an_invalid_request_error_instead_of_being_taken_for_a_notification(raw_server):
    answer = _ask(raw_server, '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}')
    assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST


def test_params_that_are_not_an_object_get_an_invalid_params_error_with_the_id(raw_server):
    answer = _ask(raw_server, '{"jsonrpc":"2.0","id":"p-1","method":"tools/call","params":[1]}')
    assert answer["id"] == "p-1" and answer["error"]["code"] == INVALID_PARAMS


def test_arguments_nested_250_deep_get_an_invalid_params_error_with_the_id(raw_server):
    line = (
        '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"memory_save",'
        f'"arguments":{{"content":"x","tags":{_deep(250)}}}}}}}'
    )
    answer = _ask(raw_server, line)
    assert answer["id"] == 8 and answer["error"]["code"] == INVALID_PARAMS
    assert "嵌套" in answer["error"]["message"]


def test_nesting_too_deep_for_the_python_parser_still_gets_an_answer_with_the_id(raw_server):
    line = '{"jsonrpc":"2.0","method":"tools/call","id":"deep","params":{"a":' + _deep(100_000) + "}}"
    answer = _ask(raw_server, line)
    assert answer["id"] == "deep" and answer["error"]["code"] == INVALID_PARAMS


def test_a_line_over_the_size_limit_is_refused_with_its_id_and_the_server_stays_up(raw_server):
    from dsh_memory_mcp.transports.stdio_guard import MAX_LINE_BYTES

    huge = "x" * (MAX_LINE_BYTES + 10)
    line = '{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"memory_save","arguments":{"content":"'
    answer = _ask(raw_server, line + huge + '"}}}')
    assert answer["id"] == 77 and answer["error"]["code"] == INVALID_REQUEST


def test_a_lone_surrogate_in_a_saved_content_is_replaced_and_the_save_is_answered(raw_server):
    line = (
        '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory_save",'
        '"arguments":{"content":"半个表情 \\ud83d 和 \\udc80 在这里"}}}'
    )
    raw_server.send_line(line)
    answer = raw_server.read_message()
    assert answer["id"] == 7 and answer["result"]["isError"] is False, answer
    rid = answer["result"]["structuredContent"]["id"]
    got = raw_server.call_tool("memory_get", {"ids": [rid]})
    assert got["result"]["structuredContent"]["records"][0]["content"] == "半个表情 \ufffd 和 \ufffd 在这里"
    raw_server.assert_alive()


def test_a_lone_surrogate_in_a_search_query_is_answered(raw_server):
    line = (
        '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"memory_search",'
        '"arguments":{"query":"\\ud800"}}}'
    )
    raw_server.send_line(line)
    answer = raw_server.read_message()
    assert answer["id"] == 12 and "result" in answer, answer
    raw_server.assert_alive()


def test_a_blank_line_is_ignored_and_the_next_request_is_answered(raw_server):
    raw_server.send_line("   ")
    raw_server.assert_alive()


def test_a_record_with_a_lone_surrogate_written_by_another_program_does_not_end_the_server(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    line = (
        '{"id":"abcdefgh-1111-2222-3333-444444444444","scope":"global","kind":"note",'
        '"content":"hello \\udc80 world","tags":[],"createdAt":1,"updatedAt":1}\n'
    )
    (store / "global.jsonl").write_text(line, encoding="utf-8")
    server = RawServer(store, tmp_path, DSH_MEMORY_VECTOR="off", XDG_STATE_HOME=str(tmp_path / "state"))
    try:
        found = server.call_tool("memory_search", {"query": "hello"})
        assert found["result"]["structuredContent"]["records"][0]["content"] == "hello \ufffd world"
        server.assert_alive()
    finally:
        assert server.close() == 0
    # The file is not "repaired": the escape is kept as written (search only counted an access).
    assert '"content":"hello \\udc80 world"' in (store / "global.jsonl").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------------------------
# the classifier alone (pure function, no process)


def test_a_valid_request_passes_through_the_classifier_unchanged():
    from dsh_memory_mcp.transports.stdio_guard import classify_line

    out = classify_line('{"jsonrpc":"2.0","id":3,"method":"tools/list"}')
    assert type(out).__name__ == "SessionMessage"
    assert out.message.method == "tools/list" and out.message.id == 3  # type: ignore[union-attr]


def test_a_malformed_response_is_answered_without_echoing_its_id():
    from dsh_memory_mcp.transports.stdio_guard import classify_line

    out = classify_line('{"jsonrpc":"2.0","id":10}')
    assert out.id is None and out.error.code == INVALID_REQUEST  # type: ignore[union-attr]
