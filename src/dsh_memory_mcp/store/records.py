"""One memory per JSONL line: parsing, serialising, and the record view the rest of the code uses.
A line is kept as the exact text it was read as, unknown fields and unparseable lines included
(docs/design.md: Store format).
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The six kinds of the store format (docs/design.md), in the order tools list them.
KINDS: tuple[str, ...] = ("fact", "decision", "preference", "procedure", "note", "rule")

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch, like JavaScript's `Date.now()`."""
    return time.time_ns() // 1_000_000


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def _normalise_number(value: Any) -> Any:
    """Integral floats as ints, so `1.0` is written `1` as JavaScript's JSON.stringify would."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def dump_line(data: Mapping[str, Any]) -> str:
    """Compact JSON with raw UTF-8, as `JSON.stringify` writes it (no trailing newline).

    A lone surrogate (possible in JSON input) cannot be encoded as UTF-8; it is written as a
    `\\udxxx` escape, which is what JSON.stringify does too.
    """
    text = json.dumps(
        {k: _normalise_number(v) for k, v in data.items()},
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
    )
    return _LONE_SURROGATE.sub(_escape_surrogate, text)


@dataclass(frozen=True, slots=True)
class CorruptLine:
    """A line that is not a JSON object with an id: kept verbatim, never dropped."""

    raw: str
    lineno: int = 0


def _opt_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return float(value)


def _int_field(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if type(value) is int:  # the common case, first
        return value
    number = _opt_number(value)
    return 0 if number is None else int(number)


#: Short strings seen so far (scope, kind, tags repeat on every line of a file), shared.
_INTERNED: dict[str, str] = {}
_INTERNED_MAX = 65536


def _text(value: Any, default: str = "") -> str:
    """A short string field, interned: scope, kind and tags repeat on every line of a file."""
    shared: str | None = _INTERNED.get(value) if type(value) is str else None
    if shared is not None:
        return shared
    if not isinstance(value, str):
        return default
    text: str = value
    if len(text) > 64:
        return text
    text = sys.intern(text)
    if len(_INTERNED) < _INTERNED_MAX:
        _INTERNED[text] = text
    return text


_CONTENT_KEY = b'"content":"'


def _content_span(raw: bytes | str, content: str) -> str | None:
    """None when `content`'s UTF-8 is in the line verbatim, right after its first ``"content":"``
    and followed by ``"`` (so `_in_line` finds it again: no second copy of the text is kept) —
    else `content` itself (an escape, another spacing, a line kept as a string)."""
    if type(raw) is not bytes:
        return content
    i = raw.find(_CONTENT_KEY)
    if i < 0:
        return content
    start = i + len(_CONTENT_KEY)
    try:
        encoded = content.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (an escape in the line): keep the text
        return content
    end = start + len(encoded)
    if raw[start:end] != encoded or raw[end : end + 1] != b'"' or b'"' in encoded:
        return content
    return None


def _in_line(raw: bytes) -> bytes:
    """The content's bytes in a line `_content_span` found them in."""
    start = raw.find(_CONTENT_KEY) + len(_CONTENT_KEY)
    return raw[start : raw.index(b'"', start)]


#: Tag tuples seen so far, shared: the same few combinations repeat on thousands of records.
_TAG_TUPLES: dict[tuple[str, ...], tuple[str, ...]] = {}
_TAG_TUPLES_MAX = 65536


def _tag_tuple(tags: list[Any]) -> tuple[str, ...]:
    try:
        shared = _TAG_TUPLES.get(tuple(tags))  # the common case: a combination seen before
    except TypeError:  # an unhashable element (a list, a dict): not a tag, dropped below
        shared = None
    if shared is not None:
        return shared
    found = tuple(_text(t) for t in tags if isinstance(t, str))
    if len(found) == len(tags) and len(_TAG_TUPLES) < _TAG_TUPLES_MAX and all(len(t) <= 64 for t in found):
        _TAG_TUPLES[found] = found
    return found


class Record:
    """A record: the exact line it came from (its UTF-8 bytes, or the string when it cannot be
    encoded), plus the fields search and rendering need. The full mapping (`data`, unknown fields
    and key order kept) is re-parsed from the line on demand; `raw` is written back while the
    record is unchanged, `with_changes` derives a modified one. Read-only by convention.
    """

    __slots__ = (
        "_content",
        "_raw",
        "_tags",
        "access_count",
        "created_at",
        "expired_at",
        "id",
        "importance",
        "kind",
        "last_accessed_at",
        "scope",
        "updated_at",
    )

    id: str
    scope: str
    kind: str
    _content: str | None
    importance: float | None
    created_at: int
    updated_at: int
    last_accessed_at: int
    access_count: int
    expired_at: int | None
    _raw: bytes | str
    _tags: tuple[str, ...]

    def __init__(self, data: Mapping[str, Any], raw: str | bytes) -> None:
        if type(raw) is str:
            try:
                raw = raw.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                pass  # a lone surrogate outside surrogateescape's range: keep the string
        self._raw = raw
        get = data.get
        self.id = str(data["id"])
        self.scope = _text(get("scope"))
        kind = get("kind")
        self.kind = _text(kind, "note") if kind is not None else "note"
        content = get("content")
        if type(content) is not str:
            content = content if isinstance(content, str) else ""
        self._content = _content_span(raw, content) if content else content
        tags = get("tags")
        self._tags = _tag_tuple(tags) if type(tags) is list and tags else ()
        importance = get("importance")
        self.importance = None if importance is None else _opt_number(importance)
        # The three stamps are equal until a record is touched or edited: share one int object.
        created = get("createdAt")
        if type(created) is not int:
            created = _int_field(data, "createdAt")
        self.created_at = created
        updated = get("updatedAt")
        if type(updated) is not int:
            updated = _int_field(data, "updatedAt")
        self.updated_at = updated = created if updated == created else updated
        accessed = get("lastAccessedAt")
        if type(accessed) is not int:
            accessed = _int_field(data, "lastAccessedAt")
        self.last_accessed_at = updated if accessed == updated else accessed
        count = get("accessCount")
        if type(count) is not int:
            count = _int_field(data, "accessCount")
        self.access_count = count if count > 0 else 0
        expired = get("expiredAt")
        if expired is None:
            self.expired_at = None
        else:
            number = _opt_number(expired)
            self.expired_at = None if number is None else int(number)

    @property
    def content(self) -> str:
        """The memory's text (decoded from its place in the line when it is stored there as is)."""
        content = self._content
        if content is not None:
            return content
        raw = self._raw
        assert isinstance(raw, bytes)
        return _in_line(raw).decode("utf-8")

    @property
    def raw(self) -> str:
        """The exact text of the line (without its newline)."""
        raw = self._raw
        return raw if isinstance(raw, str) else raw.decode("utf-8", "surrogateescape")

    @property
    def raw_bytes(self) -> bytes:
        """The exact bytes of the line (without its newline), as written to the file."""
        raw = self._raw
        return raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return False
        if type(other._raw) is type(self._raw):
            return other._raw == self._raw
        return other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self._raw)

    def __repr__(self) -> str:
        return f"Record({self.raw!r})"

    @property
    def data(self) -> dict[str, Any]:
        """The whole record as written (key order and unknown fields kept): parsed from `raw`."""
        value = json.loads(self.raw)
        assert isinstance(value, dict)
        return value

    @property
    def short_id(self) -> str:
        return self.id[:8]

    @property
    def tags(self) -> list[str]:
        return list(self._tags)

    def is_expired(self, now: int) -> bool:
        return self.expired_at is not None and self.expired_at < now

    def with_changes(self, **changes: Any) -> Record:
        """A new record with fields set (existing keys keep their place, new keys go last)."""
        data = self.data
        data.update(changes)
        return Record(data, dump_line(data))


Line = Record | CorruptLine


def parse_line(raw: str, lineno: int = 0) -> Line:
    """A record if `raw` is a JSON object with a string id, else a `CorruptLine` holding it as is."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return CorruptLine(raw, lineno)
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        return CorruptLine(raw, lineno)
    return Record(data, raw)


def parse_lines(text: str, known: Mapping[str, Record] | None = None) -> list[Line]:
    """`parse_bytes` of a file held as text (tests, the benchmark); `known` keyed by line text."""
    enc = "utf-8", "surrogateescape"
    return parse_bytes(text.encode(*enc), None if known is None else {k.encode(*enc): r for k, r in known.items()})


def parse_bytes(data: bytes, known: Mapping[bytes, Record] | None = None) -> list[Line]:
    """Every non-blank line of a scope file, its bytes kept exactly (a trailing "\\r" included).

    Every record comes from exactly one line: a line that is not one complete JSON object with an
    id on its own, or not UTF-8, is a `CorruptLine` (decoded with ``surrogateescape``, so it is
    written back byte for byte). `known`: records of an earlier version by their line bytes,
    taken as they are (a re-read parses only what changed).
    """
    out: list[Line] = []
    append = out.append
    scan = SCAN
    for n, raw in enumerate(data.split(b"\n"), start=1):
        if known is not None:
            record = known.get(raw)
            if record is not None:
                append(record)
                continue
        if raw[:1] == b"{":
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                append(CorruptLine(raw.decode("utf-8", "surrogateescape"), n))
                continue
            try:
                value, end = scan(text, 0)
            except (ValueError, RecursionError, StopIteration):
                append(CorruptLine(text, n))
                continue
            if end == len(text) or not text[end:].strip(JSON_WS):
                ident = value.get("id")
                if type(ident) is str and ident:
                    append(Record(value, raw))
                    continue
            append(CorruptLine(text, n))
        elif raw.strip():
            try:
                append(parse_line(raw.decode("utf-8"), n))
            except UnicodeDecodeError:
                append(CorruptLine(raw.decode("utf-8", "surrogateescape"), n))
    return out


def line_bytes(line: Line) -> bytes:
    """The bytes a line is written as (without its newline)."""
    if isinstance(line, Record):
        return line.raw_bytes
    return line.raw.encode("utf-8", "surrogateescape")


#: JSON's own whitespace (`str.strip()` would also strip characters json rejects, like U+3000).
JSON_WS = " \t\n\r"
#: ``scan(text, index) -> (value, end)``: `json.loads`'s C scanner without its whitespace regexes.
SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().raw_decode


def new_record(
    *,
    scope: str,
    content: str,
    kind: str = "note",
    tags: Sequence[str] = (),
    importance: float | None = None,
    supersedes: str | None = None,
    source: Mapping[str, Any] | None = None,
    now: int | None = None,
    record_id: str | None = None,
    prior: Record | None = None,
    merged: Sequence[str] = (),
) -> Record:
    """A fresh record with the keys in the order the store format gives (docs/design.md).

    `prior`: the version it replaces, whose ``createdAt``, ``lastAccessedAt``, ``accessCount`` and
    first ``source`` it keeps, adding ``editedBy`` after ``supersedes``. `merged`: ids of the
    near-duplicates it also replaced, in an optional ``merged`` last.
    """
    ts = now_ms() if now is None else now
    edit_source = dict(source) if source is not None else {"origin": "explicit"}
    data: dict[str, Any] = {
        "id": record_id or str(uuid.uuid4()),
        "scope": scope,
        "kind": kind,
        "content": content,
        "tags": list(tags),
        "source": edit_source,
        "createdAt": ts,
        "updatedAt": ts,
        "lastAccessedAt": ts,
        "accessCount": 0,
    }
    if prior is not None:
        first = prior.data.get("source")
        if isinstance(first, dict):
            data["source"] = first
        data["createdAt"] = min(prior.created_at, ts)
        data["lastAccessedAt"] = prior.last_accessed_at
        data["accessCount"] = prior.access_count
    if importance is not None:
        data["importance"] = importance
    if supersedes is not None:
        data["supersedes"] = supersedes
    if prior is not None:
        data["editedBy"] = edit_source
    if merged:
        data["merged"] = list(merged)
    return Record(data, dump_line(data))


def render_bytes(lines: Iterable[Line]) -> bytes:
    """The file bytes for these lines: each line's bytes plus a newline."""
    return b"".join(line_bytes(line) + b"\n" for line in lines)
