"""The relay's wire rules (`transports/relay_wire.py`) against the SDK's own, and its bounded SSE reader.

The relay cannot import the SDK, so it carries its own copy of a few protocol facts: the handshake
revisions, the 2026-07-28 header encoding, the headers a per-request-era POST needs. Each is checked
here against the installed SDK, so an SDK that changes them fails loudly.
"""

from __future__ import annotations

import io
import json

import pytest
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request, encode_header_value
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from dsh_memory_mcp.transports import relay_wire as wire


def test_the_relays_handshake_revisions_are_the_sdks():
    assert tuple(HANDSHAKE_PROTOCOL_VERSIONS) == wire.HANDSHAKE_VERSIONS


@pytest.mark.parametrize(
    "value",
    ["memory_save", "memory://scope/项目", " padded ", "tab\there", "=?base64?abc?=", "", "ascii~!@#"],
)
def test_header_values_are_encoded_as_the_sdk_encodes_them(value: str):
    assert wire.encode_header_value(value) == encode_header_value(value)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("server/discover", {}),
        ("tools/call", {"name": "memory_save", "arguments": {"content": "x"}}),
        ("resources/read", {"uri": "memory://scope/项目:甲"}),
        ("prompts/get", {"name": "recall", "arguments": {"topic": "x"}}),
    ],
)
def test_a_2026_request_gets_the_headers_the_sdks_server_checks(method: str, params: dict[str, object]):
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 3, "method": method, "params": params | {"_meta": meta}}
    message = wire.parse(json.dumps(body).encode())
    assert message is not None and wire.modern_version(message) == "2026-07-28"
    headers = {k.lower(): v for k, v in wire.routing_headers(message, "2026-07-28").items()}
    assert isinstance(classify_inbound_request(body, headers=headers), InboundModernRoute)


def test_a_handshake_request_names_no_per_request_revision():
    for params in ({}, {"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25"}}, {"_meta": "x"}):
        message = wire.parse(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": params}).encode())
        assert message is not None and wire.modern_version(message) is None


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":{}}', "response"),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}', "response"),
        (b'{"jsonrpc":"2.0","id":"a","method":"roots/list"}', "request"),
        (b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}', "notification"),
        (b'{"jsonrpc":"2.0","id":1}', None),
        (b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}', None),
        (b'{"jsonrpc":"2.0","id":{"x":1},"result":{}}', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"x"}', None),
        (b'{"jsonrpc":"2.0","id":null,"result":{}}', None),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"y"}}', None),
        (b'{"jsonrpc":"1.0","id":1,"result":{}}', None),
        (b'[{"jsonrpc":"2.0","id":1,"result":{}}]', None),
        (b"<html>", None),
        (b'{"jsonrpc":"2.0","id":1,"result":{"t":"\xff"}}', None),
    ],
)
def test_only_one_whole_json_rpc_message_is_accepted(data: bytes, kind: str | None):
    message = wire.parse(data)
    assert (message.kind if message is not None else None) == kind


def test_json_over_several_lines_goes_out_on_one():
    data = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"text": "两行"}}, indent=2, ensure_ascii=False).encode()
    message = wire.parse(data)
    assert message is not None
    line = wire.one_line(data, message)
    assert b"\n" not in line and json.loads(line) == json.loads(data)
    single = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    assert wire.one_line(single, wire.parse(single)) is single  # type: ignore[arg-type]


def _events(raw: bytes, limit: int = wire.MAX_MESSAGE_BYTES) -> list[bytes]:
    return list(wire.read_sse(io.BufferedReader(io.BytesIO(raw)), limit))  # type: ignore[arg-type]


def test_sse_events_are_read_whole_and_a_torn_last_event_is_dropped():
    raw = (
        b": ping\r\n\r\n"
        b"event: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
        b"id: 7\nretry: 10\n\n"  # no data: not an event
        b"data: last-but-complete\n\n"
        b'data: {"jsonrpc":"2.0","id":2,"res'  # the stream ends here
    )
    assert _events(raw) == [b'{"a":\n1}', b"last-but-complete"]
    assert _events(b"data: unterminated line") == []
    assert _events(b"data: no blank line after it\n") == []


def test_an_over_size_sse_event_is_refused_after_reading_about_the_bound():
    stream = io.BufferedReader(io.BytesIO(b"data: " + b"x" * 10_000 + b"\n\n" + b"data: fine\n\n"))
    with pytest.raises(wire.Misbehaving):
        list(wire.read_sse(stream, 1_000))  # type: ignore[arg-type]
    assert stream.tell() < 2_000
    many_lines = b"".join(b"data: " + b"y" * 300 + b"\n" for _ in range(10)) + b"\n"
    with pytest.raises(wire.Misbehaving):
        _events(many_lines, 1_000)  # the event's lines together are over the bound


def test_an_over_size_body_is_refused():
    with pytest.raises(wire.Misbehaving):
        wire.read_body(io.BytesIO(b"z" * 2_001), 2_000)  # type: ignore[arg-type]
    assert wire.read_body(io.BytesIO(b"z" * 2_000), 2_000) == b"z" * 2_000  # type: ignore[arg-type]
