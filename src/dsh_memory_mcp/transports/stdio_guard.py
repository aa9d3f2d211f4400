"""Our stdio transport, in place of the SDK's `stdio_server` (same ``(read, write)`` shape): every
input line gets a JSON-RPC answer (docs/design.md: Command line), and no output can kill the server
(the SDK's writer raises on a lone surrogate). While it serves, fd 0 points at the null device and
fd 1 at stderr, so a stray ``print`` cannot corrupt the channel.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, BinaryIO, cast

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from dsh_memory_mcp.transports.relay_wire import DRAIN_SECONDS, MAX_LINE_BYTES, bounded_lines, valid_id

log = logging.getLogger("dsh_memory_mcp.transports.stdio_guard")

#: Deepest nesting of objects/arrays accepted in one message (the SDK's parser stops near 200).
MAX_DEPTH = 64

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602
_PEEK_BYTES = 64 * 1024
_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|[^"\[\]{}]+', re.DOTALL)
_NUMBER = re.compile(r"\s*(-?\d+)\s*(?:,|$)")


# ----------------------------------------------------------------------------------------------
# one line in → a message to pass on, an answer to send back, or nothing


def _error(code: int, message: str, ident: Any = None) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message))


def _scrub(data: Any, **dumps: Any) -> tuple[str, int]:
    """`data` as JSON text with every lone surrogate replaced by U+FFFD, and how many were replaced."""
    return _SURROGATE.subn("\ufffd", json.dumps(data, ensure_ascii=False, **dumps))


def _depth(value: Any) -> int:
    """Deepest nesting of dicts/lists in a parsed value (iterative)."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, level)
            children = node.values() if isinstance(node, dict) else node
            todo.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _peek_request(text: str) -> tuple[bool, int | str | None]:
    """(looks like a request, its id) read from the top level of a line too deep or long to parse.

    A tokenizer over strings and brackets, not a parser: enough to find the keys ``"method"`` and
    ``"id"`` of the outermost object, wherever they stand, in the line's first `_PEEK_BYTES`.
    """
    tokens = _TOKEN.findall(text[:_PEEK_BYTES])
    depth = 0
    has_method = False
    ident: int | str | None = None
    for i, token in enumerate(tokens):
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
        elif depth == 1 and token.startswith('"') and i + 1 < len(tokens):
            after = tokens[i + 1].lstrip()
            if not after.startswith(":"):
                continue  # a value, not a key
            key = token[1:-1]
            if key == "method":
                has_method = True
            elif key == "id":
                number = _NUMBER.match(after[1:])
                if number:
                    ident = int(number.group(1))
                elif not after[1:].strip() and i + 2 < len(tokens) and tokens[i + 2].startswith('"'):
                    try:
                        ident = json.loads(tokens[i + 2])  # a whole quoted token: a string
                    except ValueError:
                        ident = None
    return has_method, ident


def _has_id(line: str) -> bool:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "id" in data


def _pydantic_summary(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc).splitlines()[0]
    where = ".".join(str(part) for part in errors[0]["loc"])
    return f"{where}: {errors[0]['msg']}".strip(": ")


def classify_line(line: str) -> SessionMessage | types.JSONRPCError | None:
    """What to do with one input line: pass on a message, answer an error, or (blank) nothing."""
    if not line.strip():
        return None
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as exc:
        rejected = exc
    else:
        if not (isinstance(message, types.JSONRPCNotification) and '"id"' in line and _has_id(line)):
            return SessionMessage(message)
        # The SDK reads {"id": {...}, "method": …} as a notification and would never answer it.
        return _error(INVALID_REQUEST, "无效请求:id 必须是字符串或整数。")
    try:
        data = json.loads(line)
    except RecursionError:
        return _too_deep(*_peek_request(line))
    except ValueError:
        return _error(PARSE_ERROR, "解析错误:这一行不是合法的 JSON(每行应是一条 JSON-RPC 2.0 消息)。")
    if isinstance(data, list):
        return _error(INVALID_REQUEST, "无效请求:不支持 JSON-RPC 批量请求(数组),请逐条发送。")
    if not isinstance(data, dict):
        return _error(INVALID_REQUEST, "无效请求:消息必须是 JSON 对象。")
    method = data.get("method")
    # Echo the id only for a request: an id on a malformed response belongs to *our* requests.
    ident = data.get("id") if isinstance(method, str) and valid_id(data.get("id")) else None
    if _depth(data) > MAX_DEPTH:
        return _too_deep(isinstance(method, str), ident)
    text, replaced = _scrub(data)
    if replaced:
        try:
            repaired = SessionMessage(types.jsonrpc_message_adapter.validate_json(text, by_name=False))
        except (ValidationError, ValueError) as exc:
            rejected = exc if isinstance(exc, ValidationError) else rejected
        else:
            kind = type(repaired.message).__name__
            log.info("replaced %d lone surrogate(s) by U+FFFD in a %s", replaced, kind)
            return repaired
    if data.get("jsonrpc") != "2.0":
        return _error(INVALID_REQUEST, '无效请求:需要 "jsonrpc": "2.0"。', ident)
    if "id" in data and isinstance(method, str) and ident is None:
        return _error(INVALID_REQUEST, "无效请求:id 必须是字符串或整数。")
    if isinstance(method, str) and "params" in data and not isinstance(data["params"], (dict, type(None))):
        return _error(INVALID_PARAMS, "参数无效:params 必须是 JSON 对象。", ident)
    return _error(INVALID_REQUEST, f"无效请求:不是合法的 JSON-RPC 2.0 消息({_pydantic_summary(rejected)})。", ident)


def _too_deep(is_request: bool, ident: int | str | None) -> types.JSONRPCError:
    code = INVALID_PARAMS if is_request and ident is not None else INVALID_REQUEST
    return _error(code, f"参数无效:JSON 嵌套超过 {MAX_DEPTH} 层,请改用扁平的参数。", ident if is_request else None)


def _too_long(head: bytes) -> types.JSONRPCError:
    is_request, ident = _peek_request(head[:_PEEK_BYTES].decode("utf-8", errors="replace"))
    return _error(
        INVALID_REQUEST,
        f"无效请求:一行超过 {MAX_LINE_BYTES // (1024 * 1024)} MB,已丢弃;请缩短参数(content 上限见工具说明)。",
        ident if is_request else None,
    )


# ----------------------------------------------------------------------------------------------
# out: one message → one line


def encode_message(message: types.JSONRPCMessage) -> str:
    """One JSON line for `message`; lone surrogates (unencodable in UTF-8) become U+FFFD."""
    try:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
        text.encode("utf-8")
        return text
    except (ValueError, UnicodeError):
        data = message.model_dump(mode="python", by_alias=True, exclude_unset=True)
        text, replaced = _scrub(data, separators=(",", ":"), default=str)
        log.warning("outgoing message held %d lone surrogate(s): replaced by U+FFFD", replaced)
        return text


# ----------------------------------------------------------------------------------------------
# the transport


def _divert(fd: int, mode: str, target: Callable[[], int]) -> tuple[BinaryIO, Callable[[], None]]:
    """A private duplicate of `fd` to serve from, and `fd` pointed at `target()` meanwhile."""
    import fcntl

    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    try:
        replacement = target()
        os.dup2(replacement, fd)
        os.close(replacement)
    except OSError:
        pass  # serve in place; the private duplicate still carries the wire
    # closefd=False: a worker thread may still block on it after we return.
    stream = cast(BinaryIO, os.fdopen(private, mode, buffering=0 if mode == "wb" else -1, closefd=False))

    def restore() -> None:
        try:
            os.dup2(private, fd)
        except OSError:
            pass

    return stream, restore


def _std_streams() -> tuple[BinaryIO, BinaryIO, Callable[[], None]]:
    if sys.platform == "win32":  # pragma: no cover - no fd games there
        return sys.stdin.buffer, sys.stdout.buffer, lambda: None
    sys.stdout.flush()
    infile, restore_in = _divert(0, "rb", lambda: os.open(os.devnull, os.O_RDONLY))
    outfile, restore_out = _divert(1, "wb", lambda: os.dup(2))

    def restore() -> None:
        restore_out()
        restore_in()

    return infile, outfile, restore


async def _read_lines(infile: BinaryIO) -> AsyncIterator[tuple[bytes, bool]]:
    lines = bounded_lines(infile)
    while (item := await anyio.to_thread.run_sync(next, lines, None)) is not None:
        yield item


@asynccontextmanager
async def guarded_stdio() -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """``(read, write)`` over stdin/stdout, like the SDK's stdio_server.

    At end of input the read side ends once every request passed on is answered (at most
    `DRAIN_SECONDS`: the SDK's loop cancels the requests in flight when its input ends); the writer
    ends when `write` (and every answer the reader sent itself) is done. fd 0/1 are restored on exit.
    """
    infile, outfile, restore = _std_streams()
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    answers = write_send.clone()
    pending: set[Any] = set()  # ids of the requests passed on and not answered yet

    async def reader() -> None:
        async with read_send, answers:
            async for raw, whole in _read_lines(infile):
                verdict = classify_line(raw.decode("utf-8", errors="replace")) if whole else _too_long(raw)
                if verdict is None:
                    continue
                if isinstance(verdict, SessionMessage):
                    if isinstance(verdict.message, types.JSONRPCRequest):
                        pending.add(verdict.message.id)
                    await read_send.send(verdict)
                else:
                    log.info("answered an unusable input line with %d", verdict.error.code)
                    await answers.send(SessionMessage(verdict))
            with anyio.move_on_after(DRAIN_SECONDS):
                while pending:
                    await anyio.sleep(0.01)

    async def writer() -> None:
        broken = False
        async with write_recv:
            async for item in write_recv:
                if isinstance(item.message, (types.JSONRPCResponse, types.JSONRPCError)):
                    pending.discard(item.message.id)
                if broken:
                    continue
                data = (encode_message(item.message) + "\n").encode("utf-8")
                try:
                    await anyio.to_thread.run_sync(_write_all, outfile, data)
                except OSError as exc:  # the host went away: keep draining, stop writing
                    broken = True
                    log.info("stdout closed (%s); further answers are dropped", exc)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            tg.start_soon(writer)
            yield read_recv, write_send
    finally:
        restore()


def _write_all(out: BinaryIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = out.write(view)
        view = view[written or 0 :] if written is not None else view[len(view) :]
    out.flush()
