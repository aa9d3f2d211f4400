"""One memory per JSONL line: parsing, serialising, and the record view the rest of the code uses.

A store file is shared with the DSH plugin and other writers, so a line is kept as the exact
text it was read as: a record this process did not change is written back byte-for-byte, fields
we do not know survive every rewrite, and a line that does not parse is never dropped (SPEC §3).
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KINDS",
    "CorruptLine",
    "Line",
    "Record",
    "dump_line",
    "new_record",
    "now_ms",
    "parse_line",
    "parse_lines",
]

#: The six kinds of SPEC §3, in the order tools list them.
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


@dataclass(frozen=True, slots=True)
class Record:
    """A parsed record and the exact text it came from.

    `data` keeps key order and unknown fields; `raw` is what gets written back while the record
    is unchanged. Use `with_changes` to derive a modified record (it re-serialises).
    """

    data: Mapping[str, Any]
    raw: str

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def short_id(self) -> str:
        return self.id[:8]

    @property
    def scope(self) -> str:
        value = self.data.get("scope")
        return value if isinstance(value, str) else ""

    @property
    def kind(self) -> str:
        value = self.data.get("kind")
        return value if isinstance(value, str) else "note"

    @property
    def content(self) -> str:
        value = self.data.get("content")
        return value if isinstance(value, str) else ""

    @property
    def tags(self) -> list[str]:
        value = self.data.get("tags")
        if not isinstance(value, list):
            return []
        return [t for t in value if isinstance(t, str)]

    @property
    def importance(self) -> float | None:
        value = self.data.get("importance")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)

    @property
    def updated_at(self) -> int:
        return _int_field(self.data, "updatedAt")

    @property
    def created_at(self) -> int:
        return _int_field(self.data, "createdAt")

    @property
    def last_accessed_at(self) -> int:
        return _int_field(self.data, "lastAccessedAt")

    @property
    def access_count(self) -> int:
        return max(0, _int_field(self.data, "accessCount"))

    @property
    def expired_at(self) -> int | None:
        value = self.data.get("expiredAt")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return int(value)

    def is_expired(self, now: int) -> bool:
        expired_at = self.expired_at
        return expired_at is not None and expired_at < now

    def with_changes(self, **changes: Any) -> Record:
        """A new record with fields set (existing keys keep their place, new keys go last)."""
        data = dict(self.data)
        data.update(changes)
        return Record(data=data, raw=dump_line(data))


def _int_field(data: Mapping[str, Any], key: str) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return int(value)


Line = Record | CorruptLine


def parse_line(raw: str, lineno: int = 0) -> Line:
    """A record if `raw` is a JSON object with a string id, else a `CorruptLine` holding it as is."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return CorruptLine(raw, lineno)
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        return CorruptLine(raw, lineno)
    return Record(data=data, raw=raw)


def parse_lines(text: str) -> list[Line]:
    """Every line of a scope file; blank lines are dropped (they carry nothing), others kept as is.

    A line's raw text is kept exactly, a trailing "\\r" included (JSON allows it as whitespace),
    so writing the lines back reproduces the bytes.
    """
    return [parse_line(raw, n) for n, raw in enumerate(text.split("\n"), start=1) if raw.strip()]


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
) -> Record:
    """A fresh record with the keys in the order SPEC §3 gives."""
    ts = now_ms() if now is None else now
    data: dict[str, Any] = {
        "id": record_id or str(uuid.uuid4()),
        "scope": scope,
        "kind": kind,
        "content": content,
        "tags": list(tags),
        "source": dict(source) if source is not None else {"origin": "explicit"},
        "createdAt": ts,
        "updatedAt": ts,
        "lastAccessedAt": ts,
        "accessCount": 0,
    }
    if importance is not None:
        data["importance"] = importance
    if supersedes is not None:
        data["supersedes"] = supersedes
    return Record(data=data, raw=dump_line(data))


def render_lines(lines: Iterable[Line]) -> str:
    """The file text for these lines: each line's text plus "\\n"."""
    return "".join(line.raw + "\n" for line in lines)


__all__ += ["render_lines"]
