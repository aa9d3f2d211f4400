"""What the relay reads from `serve` and lets through to the host (standard library only):
bounded, whole, single-line JSON-RPC (`read_body`, `read_sse`, `parse`, `one_line`); anything else
raises `Misbehaving`, and the relay treats that `serve` as gone. Shared with serve and the stdio
server: the 2026-07-28 routing headers (`routing_headers`), the JSON-RPC id rule (`valid_id`), the
bounded host line (`bounded_lines`) and the wait at stdin EOF (`DRAIN_SECONDS`).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from dsh_memory_mcp.texts import msg

#: Revisions reached through `initialize` (a session); any other revision named in a request's
#: `_meta` is the per-request era (2026-07-28 and later). Same list as `mcp_types.version`.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
PROTOCOL_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
#: Methods whose target is mirrored in `Mcp-Name`, and the params key that names it.
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

#: The largest message from `serve` the relay passes on (our answers are far smaller).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: The longest host line the stdio server and the relay take; a longer one is answered, never held whole.
MAX_LINE_BYTES = 8 * 1024 * 1024
#: At stdin EOF, how long the stdio server and the relay still wait for the requests already read.
DRAIN_SECONDS = 30.0


class Misbehaving(Exception):
    """`serve` sent something that is not a whole, bounded JSON-RPC message (the reason is Chinese)."""


@dataclass(frozen=True)
class Message:
    """One checked JSON-RPC 2.0 message."""

    kind: str  # "request" | "notification" | "response"
    data: dict[str, Any]

    @property
    def method(self) -> str | None:
        method = self.data.get("method")
        return method if isinstance(method, str) else None

    @property
    def key(self) -> str | None:
        """`id_key` of its id (None for a notification)."""
        return id_key(self.data["id"]) if "id" in self.data else None


def id_key(ident: Any) -> str:
    """A dict key for a JSON-RPC id that keeps `1` and `"1"` apart."""
    return json.dumps(ident, ensure_ascii=False, separators=(",", ":"))


def valid_id(ident: Any) -> bool:
    """Whether `ident` may be a request's id: a string or an integer (never a bool)."""
    return isinstance(ident, (str, int)) and not isinstance(ident, bool)


def parse(data: bytes) -> Message | None:
    """The message in `data` when it is exactly one JSON-RPC 2.0 request, notification or response."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, absurdly deep
        return None
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        return None
    method = value.get("method")
    if "method" in value:
        if not isinstance(method, str) or "result" in value or "error" in value:
            return None
        params = value.get("params")
        if params is not None and not isinstance(params, (dict, list)):
            return None
        if "id" not in value:
            return Message("notification", value)
        return Message("request", value) if valid_id(value["id"]) else None
    if "id" not in value or ("result" in value) == ("error" in value):
        return None
    ident = value["id"]
    if "error" in value:
        error = value["error"]
        code = error.get("code") if isinstance(error, dict) else None
        if not (isinstance(code, int) and not isinstance(code, bool) and isinstance(error.get("message"), str)):
            return None
        return Message("response", value) if ident is None or valid_id(ident) else None
    return Message("response", value) if valid_id(ident) else None


def one_line(data: bytes, message: Message) -> bytes:
    """`data` itself when it is one line, else the same message re-serialised on one line."""
    data = data.strip()
    if b"\n" in data or b"\r" in data:
        return json.dumps(message.data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return data


def bounded_lines(stream: IO[bytes]) -> Iterator[tuple[bytes, bool]]:
    """`(line, whole)` for each line of `stream`; a line over `MAX_LINE_BYTES` comes as `(its head,
    False)`, the rest of it read and dropped chunk by chunk."""
    while raw := stream.readline(MAX_LINE_BYTES + 1):
        whole = len(raw) <= MAX_LINE_BYTES or raw.endswith(b"\n")
        rest = raw
        while not whole and rest and not rest.endswith(b"\n"):
            rest = stream.readline(MAX_LINE_BYTES)
        yield raw, whole


def read_body(response: IO[bytes], limit: int = MAX_MESSAGE_BYTES) -> bytes:
    """A non-streamed response body, at most `limit` bytes.

    :raises Misbehaving: the body is larger.
    """
    body = response.read(limit + 1)
    if len(body) > limit:
        raise Misbehaving(msg("serve 的应答超过 {mib} MiB", mib=limit // (1024 * 1024)))
    return body


def read_sse(stream: IO[bytes], limit: int = MAX_MESSAGE_BYTES) -> Iterator[bytes]:
    """The `data` of each complete server-sent event on `stream` (events without data are skipped;
    one the stream ends in the middle of is dropped, as the SSE rules say). Lines are read with a
    bound: a huge event costs at most `limit` bytes before it is refused.

    :raises Misbehaving: an event (or one line) is larger than `limit`.
    """
    data: list[bytes] = []
    size = 0
    while True:
        raw = stream.readline(limit + 3)
        if not raw:
            return  # end of stream; a pending unterminated event is not an event
        if len(raw) > limit + 2 and not raw.endswith(b"\n"):
            raise Misbehaving(msg("serve 的一个事件超过 {mib} MiB", mib=limit // (1024 * 1024)))
        line = raw.rstrip(b"\r\n")
        if not raw.endswith((b"\n", b"\r")):
            return  # the stream ended in the middle of a line
        if not line:
            if data:
                yield b"\n".join(data)
            data, size = [], 0
            continue
        if line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            size += len(value) + 1
            if size > limit:
                raise Misbehaving(msg("serve 的一个事件超过 {mib} MiB", mib=limit // (1024 * 1024)))
            data.append(value)


def meta(data: dict[str, Any]) -> dict[str, Any]:
    """The `params._meta` object of a JSON-RPC message (empty when there is none)."""
    params = data.get("params")
    found = params.get("_meta") if isinstance(params, dict) else None
    return found if isinstance(found, dict) else {}


def modern_version(message: Message) -> str | None:
    """The per-request revision (2026-07-28 or later) a request names in `params._meta`, else None."""
    version = meta(message.data).get(PROTOCOL_VERSION_META_KEY)
    if isinstance(version, str) and version and version not in HANDSHAKE_VERSIONS:
        return version
    return None


_HEADER_SAFE = re.compile(r"[\x20-\x7e]*")
_SENTINEL = re.compile(r"=\?base64\?.*\?=")


def encode_header_value(value: str) -> str:
    """A header value as the 2026-07-28 transport writes one: verbatim when it is printable ASCII
    without edge spaces, else `=?base64?<UTF-8 base64>?=`."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not _SENTINEL.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8', 'surrogatepass')).decode('ascii')}?="


def routing_headers(message: Message, version: str) -> dict[str, str]:
    """The headers a 2026-07-28 request needs next to its body: revision, method, and the name it targets."""
    headers = {PROTOCOL_HEADER: version}
    method = message.method
    if method is None:
        return headers
    headers[METHOD_HEADER] = encode_header_value(method)
    name_key = NAME_BEARING.get(method)
    params = message.data.get("params")
    if name_key is not None and isinstance(params, dict) and isinstance(params.get(name_key), str):
        headers[NAME_HEADER] = encode_header_value(params[name_key])
    return headers


def rpc_error(ident: Any, code: int, message: str) -> bytes:
    """One JSON-RPC error line (no newline)."""
    payload = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
