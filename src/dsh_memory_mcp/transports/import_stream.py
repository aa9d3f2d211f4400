"""The web page's import request, read as it arrives (docs/design.md: Web page).

The body is one JSON object: ``data`` (the file, base64) or ``text`` (the file as a string), plus
``scope`` and ``dryRun``. The value of ``data``/``text`` is unescaped, decoded and fed line by line
to `transfer.ImportPlanner` as it arrives, so only the plan is kept; the other members (together at
most `OTHER_MAX_BYTES`) are parsed by `json`. The answers are those of parsing it whole: 413 over
the limit, 400 ``BAD_JSON``, ``plan`` None when there is no usable ``data``/``text`` (``data`` wins).
"""

from __future__ import annotations

import asyncio
import binascii
import codecs
import json
import re
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request

from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.service.transfer import ImportPlan, ImportPlanner
from dsh_memory_mcp.texts import msg

#: Members other than ``data``/``text`` (scope, dryRun, whatever else a client sends), in all.
OTHER_MAX_BYTES = 1 << 20
#: Bytes handed to the worker thread at once.
_BATCH = 1 << 20
_STREAMED = ("data", "text")
_WS = b" \t\r\n"
_SPECIAL = re.compile(rb'["\\\x00-\x1f]')
_KEY = re.compile(rb'"(?:[^"\\\x00-\x1f]|\\.)*"', re.DOTALL)
_NOT_B64 = re.compile(rb"[^A-Za-z0-9+/]")
_ESCAPES = {ord('"'): b'"', ord("\\"): b"\\", ord("/"): b"/", ord("b"): b"\b", ord("f"): b"\f"}
_ESCAPES |= {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t"}


class RequestRefused(Exception):
    """A request the web API refuses: the status, code and message to answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _bad_json(message: str = msg("请求体不是合法的 JSON。")) -> RequestRefused:
    return RequestRefused(400, "BAD_JSON", message)


@dataclass(frozen=True)
class ImportUpload:
    """What the body said: the plan of its file (None: no usable ``data``/``text``) and its members."""

    plan: ImportPlan | None
    members: dict[str, Any]

    @property
    def dry_run(self) -> bool:
        return self.members.get("dryRun", True) is not False

    @property
    def scope(self) -> Any:
        return self.members.get("scope")


class _Base64Sink:
    """``data``: `base64.b64decode(validate=True)`'s rule, decoded four characters at a time."""

    def __init__(self, settings: Settings) -> None:
        self.planner = ImportPlanner(settings)
        self.pending = bytearray()
        self.padding = 0
        self.bad = False

    def feed(self, data: bytes) -> None:
        if self.bad or not data:
            return
        wrong = _NOT_B64.search(data)
        body = data if wrong is None else data[: wrong.start()]
        rest = b"" if wrong is None else data[wrong.start() :]
        if self.padding and body:
            self.bad = True  # alphabet after the padding
            return
        if rest:
            if rest.strip(b"=") or self.padding + len(rest) > 2:
                self.bad = True
                return
            self.padding += len(rest)
        self.pending += body
        whole = len(self.pending) - len(self.pending) % 4
        if whole:
            self.planner.feed(binascii.a2b_base64(bytes(self.pending[:whole])))
            del self.pending[:whole]

    def finish(self) -> ImportPlan | None:
        # binascii's rule: a last group of 2 needs "==", of 3 at least one "=", of 1 is never valid;
        # padding after whole groups is ignored.
        left, pad = len(self.pending), self.padding
        if self.bad or left == 1 or (left == 2 and pad < 2) or (left == 3 and pad < 1):
            return None
        if left:
            self.planner.feed(binascii.a2b_base64(bytes(self.pending) + b"=" * (4 - left)))
        return self.planner.finish()


class _Discard:
    def feed(self, data: bytes) -> None:
        pass

    def finish(self) -> ImportPlan | None:
        return None


#: Where a streamed string's content goes: ``text`` straight to a planner (its UTF-8 bytes, a lone
#: surrogate kept as such, so its line is reported), ``data`` through base64, a losing one nowhere.
_Sink = ImportPlanner | _Base64Sink | _Discard


class _ObjectReader:
    """An incremental reader of one JSON object whose ``data``/``text`` strings are streamed to sinks."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.utf8 = codecs.getincrementaldecoder("utf-8")("surrogatepass")
        self.buf = bytearray()
        self.pos = 0
        self.state = "start"
        self.at_start = True
        self.key = ""
        self.members: dict[str, Any] = {}
        self.other = 0
        #: the last ``data``/``text`` member that was a string → its sink
        self.sinks: dict[str, _Sink] = {}
        self.sink: _Sink = _Discard()

    # -- input ---------------------------------------------------------------------------------

    def feed(self, chunk: bytes) -> None:
        try:
            self.utf8.decode(chunk)
        except UnicodeDecodeError:
            raise _bad_json() from None
        self.buf += chunk
        self._run(eof=False)
        del self.buf[: self.pos]
        self.pos = 0

    def finish(self) -> ImportUpload:
        try:
            self.utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            raise _bad_json() from None
        self._run(eof=True)
        if self.state != "done":
            raise _bad_json(
                msg("请求体必须是 JSON 对象。")
                if self.state == "start" and self.buf.strip()
                else msg("请求体不是合法的 JSON。")
            )
        sink = self.sinks.get("data") or self.sinks.get("text")
        return ImportUpload(plan=None if sink is None else sink.finish(), members=self.members)

    # -- the states ----------------------------------------------------------------------------

    def _skip_ws(self) -> int | None:
        """The next non-blank byte (not consumed), or None when the buffer ran out."""
        buf, pos = self.buf, self.pos
        while pos < len(buf) and buf[pos] in _WS:
            pos += 1
        self.pos = pos
        return buf[pos] if pos < len(buf) else None

    def _run(self, *, eof: bool) -> None:
        while True:
            if self.state == "string":
                if not self._stream_string(eof):
                    return
                continue
            if self.state == "value-raw":
                if not self._raw_value(eof):
                    return
                continue
            if self.at_start:  # a UTF-8 BOM may open the body (`json.loads` of bytes allows one)
                head = bytes(self.buf[:3])
                if head and len(head) < 3 and codecs.BOM_UTF8.startswith(head) and not eof:
                    return
                if head == codecs.BOM_UTF8:
                    self.pos = 3
                if head or eof:
                    self.at_start = False
            byte = self._skip_ws()
            if byte is None:
                return
            if self.state == "start":
                if byte != ord("{"):
                    raise _bad_json(msg("请求体必须是 JSON 对象。"))
                self.pos += 1
                self.state = "key-or-end"
            elif self.state in ("key-or-end", "key"):
                if byte == ord("}") and self.state == "key-or-end":
                    self.pos += 1
                    self.state = "done"
                elif byte == ord('"'):
                    if not self._key(eof):
                        return
                else:
                    raise _bad_json()
            elif self.state == "colon":
                if byte != ord(":"):
                    raise _bad_json()
                self.pos += 1
                self.state = "value"
            elif self.state == "value":
                if self.key in _STREAMED and byte == ord('"'):
                    self.pos += 1
                    self._open_sink(self.key)
                    self.state = "string"
                else:
                    self.state = "value-raw"
            elif self.state == "after-value":
                if byte == ord(","):
                    self.state = "key"
                elif byte == ord("}"):
                    self.state = "done"
                else:
                    raise _bad_json()
                self.pos += 1
            else:  # done: only blanks may follow
                raise _bad_json()

    def _count_other(self, size: int) -> None:
        self.other += size
        if self.other > OTHER_MAX_BYTES:
            raise RequestRefused(
                413,
                "BODY_TOO_LARGE",
                msg("导入请求里 data/text 以外的字段合计超过 {mb} MB。", mb=OTHER_MAX_BYTES >> 20),
            )

    def _key(self, eof: bool) -> bool:
        match = _KEY.match(self.buf, self.pos)
        if match is None:
            if eof or len(self.buf) - self.pos > OTHER_MAX_BYTES:
                raise _bad_json()
            return False
        self._count_other(match.end() - match.start())
        try:
            self.key = json.loads(match.group().decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError):
            raise _bad_json() from None
        self.pos = match.end()
        self.state = "colon"
        return True

    def _raw_value(self, eof: bool) -> bool:
        """A member that is not streamed: parsed by `json` once it is followed by something (or EOF)."""
        room = OTHER_MAX_BYTES - self.other + 1  # no member is looked at past what it may take
        window = bytes(self.buf[self.pos : self.pos + room])
        text = codecs.getincrementaldecoder("utf-8")("surrogatepass").decode(window)
        try:
            value, end = json.JSONDecoder().raw_decode(text)
        except (ValueError, RecursionError):
            if len(window) >= room:
                self._count_other(room)
            if eof:
                raise _bad_json() from None
            return False
        if end == len(text) and not eof:
            return False  # a number may go on in the next chunk
        size = len(text[:end].encode("utf-8", "surrogatepass"))
        self._count_other(size)
        self.pos += size
        self.members[self.key] = value
        self.sinks.pop(self.key, None)  # a later member of the same name wins, as in `json.loads`
        self.state = "after-value"
        return True

    def _open_sink(self, key: str) -> None:
        self.members[key] = True  # a string; its content goes to the sink
        if key == "data":
            self.sinks.pop("text", None)  # data wins: stop planning the text
            self.sink = self.sinks["data"] = _Base64Sink(self.settings)
        elif "data" in self.sinks:
            self.sink = _Discard()
        else:
            self.sink = self.sinks["text"] = ImportPlanner(self.settings)

    def _stream_string(self, eof: bool) -> bool:
        buf, pos, sink = self.buf, self.pos, self.sink
        while True:
            match = _SPECIAL.search(buf, pos)
            end = len(buf) if match is None else match.start()
            if end > pos:
                sink.feed(bytes(buf[pos:end]))
            pos = end
            if match is None:
                self.pos = pos
                if eof:
                    raise _bad_json()
                return False
            byte = buf[pos]
            if byte == ord('"'):
                self.pos = pos + 1
                self.state = "after-value"
                return True
            if byte != ord("\\"):
                raise _bad_json()  # a raw control character inside a string
            decoded, used = _escape(buf, pos, eof)
            if used == 0:
                self.pos = pos
                return False  # the escape goes on in the next chunk
            sink.feed(decoded)
            pos += used


def _escape(buf: bytearray, pos: int, eof: bool) -> tuple[bytes, int]:
    """The bytes a backslash escape at `pos` stands for and its length; (b"", 0) when incomplete."""
    if pos + 1 >= len(buf):
        if eof:
            raise _bad_json()
        return b"", 0
    kind = buf[pos + 1]
    if kind in _ESCAPES:
        return _ESCAPES[kind], 2
    if kind != ord("u"):
        raise _bad_json()
    if pos + 6 > len(buf):
        if eof:
            raise _bad_json()
        return b"", 0
    code = _hex4(buf[pos + 2 : pos + 6])
    if 0xD800 <= code < 0xDC00:  # a high surrogate: joined with a low one that follows, as `json` does
        follows = bytes(buf[pos + 6 : pos + 12])
        if len(follows) < 6 and not eof and b"\\u".startswith(follows[:2]):
            return b"", 0  # a low surrogate may be on its way
        if len(follows) == 6 and follows.startswith(b"\\u"):
            low = _hex4(bytearray(follows[2:]))
            if 0xDC00 <= low < 0xE000:
                joined = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                return chr(joined).encode("utf-8"), 12
    return chr(code).encode("utf-8", "surrogatepass"), 6


def _hex4(raw: bytearray) -> int:
    text = bytes(raw).decode("ascii", "replace")
    if len(text) != 4 or any(c not in "0123456789abcdefABCDEF" for c in text):
        raise _bad_json()
    return int(text, 16)


async def body_chunks(request: Request, limit: int) -> AsyncIterator[bytes]:
    """`request`'s body as it arrives.

    :raises RequestRefused: 413 when it is (or says it is) larger than `limit` bytes.
    """
    too_large = RequestRefused(413, "BODY_TOO_LARGE", msg("请求体超过 {mb} MB 上限。", mb=limit // (1 << 20)))
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        yield chunk


async def read_import(request: Request, limit: int, settings: Settings) -> ImportUpload:
    """Read `request`'s body (at most `limit` bytes) as an import request, planning its file as it arrives.

    :raises RequestRefused: 413 over the limit, 400 ``BAD_JSON``.
    """
    reader = _ObjectReader(settings)
    batch = bytearray()
    async for chunk in body_chunks(request, limit):
        batch += chunk
        if len(batch) >= _BATCH:
            await anyio.to_thread.run_sync(reader.feed, bytes(batch))
            batch.clear()
    if batch:
        await anyio.to_thread.run_sync(reader.feed, bytes(batch))
    return await anyio.to_thread.run_sync(reader.finish)


_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, anyio.Lock] = weakref.WeakKeyDictionary()


@asynccontextmanager
async def one_import_at_a_time() -> AsyncIterator[None]:
    """Hold the import slot of this event loop (one import's plan in memory at a time)."""
    loop = asyncio.get_running_loop()
    lock = _SLOTS.get(loop)
    if lock is None:
        lock = _SLOTS[loop] = anyio.Lock()
    async with lock:
        yield
