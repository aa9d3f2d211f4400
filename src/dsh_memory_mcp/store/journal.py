"""The write journal: what this package acknowledged, so a record erased by an unlocked writer can
be noticed and restored.

Beside writers that ignore the lock (the DSH plugin rewrites a whole scope file from a snapshot
it loaded earlier), a record we wrote and acknowledged can vanish from its scope file. The file
cannot tell; this journal can. Every acknowledged write appends one line to
``<store>/.journal/<YYYYMMDD>[.<n>].ndjson`` (dir 0700, files 0600), fsync-ed before the write is
acknowledged:

* ``{"op":"save","scope":…,"id":…,"line":…}`` — after the record is committed (a save, the new
  record of a supersede, an imported record); ``line`` is its exact text.
* ``{"op":"forget","scope":…,"ids":[…]}`` / ``{"op":"supersede","scope":…,"ids":[…]}`` —
  *before* the removal or the expiry is committed, so a reader that finds the record gone
  always finds the reason in the journal too.

All appends go through ``O_APPEND`` with one ``write`` per line (lines never interleave). Every
writer of a scope appends inside the scope lock, so the journal's order per scope is the order
of the commits. A record is *missing* when the journal has its save, no later forget or
supersede, and its id is in no line of its scope file. `Journal.missing` finds them (reading
the file, then the journal, then the file again, so a write racing the check is never taken for
a loss); `recover` restores them byte-for-byte.

Bounded: segments older than ``max_age`` days are removed, and the oldest ones while the
journal is larger than ``max_bytes`` (never the newest). A pruned save is simply forgotten.
Segments of past days are compacted to the saves still live, so the text of a record our tools
forgot leaves the journal within a day. `prune` runs at `SharedStore.prepare` and every 500
appends.
Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dsh_memory_mcp.store import fileio

__all__ = ["JOURNAL_DIR", "Entry", "Journal"]

logger = logging.getLogger("dsh_memory_mcp.store.journal")

JOURNAL_DIR = ".journal"
_SEGMENT = re.compile(r"^(?P<day>[0-9]{8})(?:\.(?P<n>[0-9]+))?\.ndjson$")
_O_BINARY: int = getattr(os, "O_BINARY", 0)
_O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True, slots=True)
class Entry:
    """A record we saved and never removed: its scope, id and exact line."""

    scope: str
    id: str
    line: str
    at: int


def _segment_key(name: str) -> tuple[str, int]:
    match = _SEGMENT.match(name)
    assert match is not None
    return match["day"], int(match["n"] or 0)


class Journal:
    """The journal of one store directory; safe to share between threads.

    :param root: the store directory (the journal lives in ``<root>/.journal``).
    :param max_age: days a segment is kept.
    :param max_bytes: total size above which the oldest segments are removed.
    :param segment_bytes: a segment this large is closed and the next one started.
    """

    def __init__(
        self,
        root: str,
        *,
        max_age: float = 30.0,
        max_bytes: int = 64 << 20,
        segment_bytes: int = 8 << 20,
    ) -> None:
        self.dir = os.path.join(os.path.abspath(root), JOURNAL_DIR)
        self.max_age = max_age
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._offsets: dict[str, int] = {}  # segment name → bytes consumed
        self._live: dict[str, dict[str, Entry]] = {}  # scope → id → entry
        self._appends = 0

    # -- writing ---------------------------------------------------------------------------

    def saved(self, scope: str, lines: Iterable[tuple[str, str]]) -> None:
        """Journal committed records ``(id, exact line)`` of `scope`; durable when it returns.

        :raises OSError: the journal cannot be written (the caller must not acknowledge then).
        """
        now = _now_ms()
        payload = [
            json.dumps({"t": now, "op": "save", "scope": scope, "id": rid, "line": raw}, ensure_ascii=False)
            for rid, raw in lines
        ]
        self._append(payload)

    def removed(self, scope: str, ids: Sequence[str], *, op: str = "forget") -> None:
        """Journal that our tools remove (``forget``) or expire (``supersede``) these ids of `scope`.

        Call *before* committing the change. :raises OSError: as `saved`.
        """
        if not ids:
            return
        self._append([json.dumps({"t": _now_ms(), "op": op, "scope": scope, "ids": list(ids)}, ensure_ascii=False)])

    def _append(self, lines: Sequence[str]) -> None:
        if not lines:
            return
        data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
        created = not os.path.isdir(self.dir)
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        if created:
            fileio.fsync_dir(os.path.dirname(self.dir))
        path = self._current_segment()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _O_BINARY | _O_CLOEXEC, 0o600)
        try:
            fileio.write_all(fd, data)  # in practice one write(2): O_APPEND keeps lines whole
            os.fsync(fd)
        finally:
            os.close(fd)
        self._appends += 1
        if self._appends % 500 == 1:
            with contextlib.suppress(OSError):
                self.prune()

    def _current_segment(self) -> str:
        day = time.strftime("%Y%m%d", time.gmtime())
        n = 0
        for name in self._segments():
            seg_day, seg_n = _segment_key(name)
            if seg_day == day:
                n = max(n, seg_n)
        path = os.path.join(self.dir, f"{day}.{n}.ndjson" if n else f"{day}.ndjson")
        try:
            if os.stat(path).st_size >= self.segment_bytes:
                path = os.path.join(self.dir, f"{day}.{n + 1}.ndjson")
        except FileNotFoundError:
            pass
        return path

    def _segments(self) -> list[str]:
        try:
            names = os.listdir(self.dir)
        except OSError:
            return []
        return sorted((n for n in names if _SEGMENT.match(n)), key=_segment_key)

    def prune(self) -> list[str]:
        """Remove segments past `max_age`, then the oldest while over `max_bytes` (never the newest);
        then compact past days' segments (`_compact`). Returns the removed segment names."""
        removed: list[str] = []
        names = self._segments()
        sizes: dict[str, int] = {}
        cutoff = time.strftime("%Y%m%d", time.gmtime(time.time() - self.max_age * 86400))
        for name in names:
            try:
                sizes[name] = os.lstat(os.path.join(self.dir, name)).st_size
            except OSError:
                sizes[name] = 0
        total = sum(sizes.values())
        for name in names[:-1]:
            if _segment_key(name)[0] >= cutoff and total <= self.max_bytes:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.dir, name))
            total -= sizes[name]
            removed.append(name)
        if removed:
            with self._lock:
                self._offsets.clear()
                self._live.clear()
        self._compact()
        return removed

    def _compact(self) -> None:
        """Rewrite the segments of past (UTC) days keeping only the saves that are still live.

        So the text of a forgotten or superseded record does not linger until its segment ages
        out: it is gone from the journal within a day. Today's segments (the ones writers append
        to) are never rewritten.
        """
        today = time.strftime("%Y%m%d", time.gmtime())
        old = [name for name in self._segments() if _segment_key(name)[0] < today]
        if not old:
            return
        self.refresh()
        with self._lock:
            live = {(scope, rid) for scope, entries in self._live.items() for rid in entries}
        changed = False
        for name in old:
            path = os.path.join(self.dir, name)
            try:
                fd = fileio.open_regular(path, follow=False)
                with open(fd, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            kept = [raw for raw in data.split(b"\n") if raw and _keeps(raw, live)]
            payload = b"".join(raw + b"\n" for raw in kept)
            if payload == data:
                continue
            try:
                tmp_fd, tmp = fileio.new_tmp(path)
                fileio.commit(tmp_fd, tmp, path, payload)
            except OSError:
                continue
            changed = True
        if changed:
            with self._lock:
                self._offsets.clear()
                self._live.clear()

    # -- reading ---------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read what was appended since the last call (by any process)."""
        with self._lock:
            names = self._segments()
            if any(name not in names for name in self._offsets):  # pruned meanwhile: start over
                self._offsets.clear()
                self._live.clear()
            for name in names:
                self._read_segment(name)

    def _read_segment(self, name: str) -> None:
        path = os.path.join(self.dir, name)
        start = self._offsets.get(name, 0)
        try:
            fd = fileio.open_regular(path, follow=False)
        except OSError:
            return
        try:
            if os.fstat(fd).st_size <= start:
                return
            os.lseek(fd, start, os.SEEK_SET)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        end = data.rfind(b"\n") + 1  # a line still being written (or torn by a crash) waits
        self._offsets[name] = start + end
        for raw in data[:end].split(b"\n"):
            if raw:
                self._apply(raw)

    def _apply(self, raw: bytes) -> None:
        try:
            item = json.loads(raw.decode("utf-8", "surrogatepass"))
        except (ValueError, RecursionError):
            return
        if not isinstance(item, dict) or not isinstance(item.get("scope"), str):
            return
        scope, op = item["scope"], item.get("op")
        if op == "save":
            rid, line, at = item.get("id"), item.get("line"), item.get("t")
            if isinstance(rid, str) and isinstance(line, str):
                self._live.setdefault(scope, {})[rid] = Entry(scope, rid, line, at if isinstance(at, int) else 0)
        elif op in ("forget", "supersede"):
            ids = item.get("ids")
            live = self._live.get(scope)
            if live and isinstance(ids, list):
                for rid in ids:
                    if isinstance(rid, str):
                        live.pop(rid, None)

    def live(self, scope: str) -> dict[str, Entry]:
        """Records of `scope` we saved and never removed, as of the last `refresh`."""
        with self._lock:
            return dict(self._live.get(scope, {}))

    def scopes(self) -> list[str]:
        with self._lock:
            return sorted(scope for scope, live in self._live.items() if live)

    def missing(self, scope: str, present: Iterable[str]) -> list[Entry]:
        """Entries of `scope` (after a `refresh`) whose ids are not in `present`, in journal order."""
        ids = set(present)
        with self._lock:
            live = self._live.get(scope, {})
            return [entry for rid, entry in live.items() if rid not in ids]


def _keeps(raw: bytes, live: set[tuple[str, str]]) -> bool:
    """Whether a journal line of a past day survives compaction: only saves still live."""
    try:
        item = json.loads(raw.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError):
        return False
    return isinstance(item, dict) and item.get("op") == "save" and (item.get("scope"), item.get("id")) in live


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
