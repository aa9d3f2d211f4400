"""The write journal: what this package acknowledged, so a record erased by an unlocked writer can
be noticed and restored (docs/design.md: Store format, Concurrency — missing, doubtful, scrubbed).

``<store>/.journal/<YYYYMMDD>[.<n>].ndjson`` (dir 0700, files 0600), one line per event:
``{"op":"save","scope","id","line"}`` after a commit (``line``: the record's exact text), and
``{"op":"forget"|"supersede","scope","ids"}`` *before* a removal is committed. Each batch is one
``O_APPEND`` write starting with a newline; a short write is an error.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import logging
import os
import re
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.records import JSON_WS, SCAN, now_ms
from dsh_memory_mcp.store.redact import Once
from dsh_memory_mcp.texts import msg

logger = logging.getLogger("dsh_memory_mcp.store.journal")

JOURNAL_DIR = ".journal"
_SEGMENT = re.compile(r"^(?P<day>[0-9]{8})(?:\.(?P<n>[0-9]+))?\.ndjson$")
_REMOVALS = ("forget", "supersede")
#: A segment not modified for this long may be compacted (a writer that computed today's segment
#: name just before midnight may still be appending to it a moment after).
_QUIET_SECS = 600.0

#: Where one save line sits: (segment name, byte offset, length without the newline).
Place = tuple[str, int, int]


@dataclass(slots=True)
class Entry:
    """A record we saved and never removed: its scope, id and exact line; `places`: the journal
    lines still holding its text; `seq`: the order of its latest save among every line read."""

    scope: str
    id: str
    line: str
    at: int
    places: tuple[Place, ...] = ()
    seq: int = 0


@dataclass(frozen=True, slots=True)
class Doubt:
    """Why a live record may have been removed after all: a line that did not parse named it."""

    entry: Entry
    segment: str
    lineno: int

    @property
    def reason(self) -> str:
        return msg(
            "写入日志 {journal}/{segment} 第 {lineno} 行无法解析且提到了这条记忆(可能是一次删除或取代),"
            "无法排除它已被删除,没有恢复",
            journal=JOURNAL_DIR,
            segment=self.segment,
            lineno=self.lineno,
        )


@dataclass(slots=True)
class _Unparsed:
    """A journal line that is not an entry we write (torn, glued, edited), kept to raise doubts."""

    segment: str
    lineno: int
    seq: int
    raw: bytes
    _tokens: frozenset[bytes] | None = field(default=None, repr=False)

    def mentions(self, rid: str) -> bool:
        """Whether `rid` appears in the line as a JSON string (raw or escaped)."""
        if self._tokens is None:
            self._tokens = frozenset(_TOKEN_SPLIT.split(self.raw))
        plain = rid.encode("utf-8", "surrogatepass")
        if _TOKEN_SPLIT.search(plain) is None:
            return plain in self._tokens
        escaped = json.dumps(rid)[1:-1].encode("ascii")
        return plain in self.raw or escaped in self.raw


_TOKEN_SPLIT = re.compile(rb'[\s"\\,\[\]{}:]+')


def _segment_key(name: str) -> tuple[str, int]:
    match = _SEGMENT.match(name)
    assert match is not None
    return match["day"], int(match["n"] or 0)


def _segment_name(day: str, n: int) -> str:
    return f"{day}.{n}.ndjson" if n else f"{day}.ndjson"


class Journal:
    """The journal of one store directory (``<root>/.journal``); thread-safe. Segments are kept
    `max_age` days and `max_bytes` in all, and closed at `segment_bytes`."""

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
        # segment → (inode, bytes consumed, lines consumed, non-blank lines among them)
        self._offsets: dict[str, tuple[int, int, int, int]] = {}
        self._live: dict[str, dict[str, Entry]] = {}  # scope → id → entry
        self._unparsed: list[_Unparsed] = []
        self._pending: list[tuple[Place, str, str, str]] = []  # (place, scope, id, op) to scrub
        self._seq = 0
        self._appends = 0
        self._pruned_day = ""
        self._warned = Once()
        self._due = False
        # For `saved_since`: per scope, its saved ids in journal order; the epoch changes on a reset.
        self._order: dict[str, list[str]] = {}
        self._epoch = 0
        #: ``segment_reads``: segments opened by `refresh` (one unchanged since is only lstat'ed).
        self.stats: Counter[str] = Counter()

    # -- writing ---------------------------------------------------------------------------

    def saved(self, scope: str, lines: Iterable[tuple[str, str]], *, defer: fileio.Durability | None = None) -> None:
        """Journal committed records ``(id, exact line)`` of `scope`; durable when it returns (with
        `defer`: once ``defer.sync()`` returned, after the scope lock is released).

        :raises OSError: the journal cannot be written (the caller must not acknowledge then).
        """
        now = now_ms()
        payload = [
            json.dumps({"t": now, "op": "save", "scope": scope, "id": rid, "line": raw}, ensure_ascii=False)
            for rid, raw in lines
        ]
        self._append(payload, defer=defer)

    def removed(self, scope: str, ids: Sequence[str], *, op: str = "forget") -> None:
        """Journal that our tools remove (``forget``) or expire (``supersede``) these ids of `scope`.

        Call *before* committing the change; once it is committed, call `scrub`.
        :raises OSError: as `saved` (then do not commit: nothing may be removed).
        """
        if not ids:
            return
        self._append([json.dumps({"t": now_ms(), "op": op, "scope": scope, "ids": list(ids)}, ensure_ascii=False)])

    def _append(self, lines: Sequence[str], *, defer: fileio.Durability | None = None) -> None:
        if not lines:
            return
        body = "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")
        fileio.private_dirs(self.dir, lambda made: fileio.fsync_dir(os.path.dirname(made)))
        fd, new_file = self._open_segment()
        # Into a file that may end with a line a failed writer left torn, a leading newline, so
        # ours is never glued to it (checking the last byte first would race with that writer).
        data = body if new_file else b"\n" + body
        try:
            written = os.write(fd, data)
            if written != len(data):  # a file-size limit, a full disk: the batch is torn, not retried
                raise OSError(
                    errno.EIO, msg("写入不完整(只写入了 {written}/{count} 字节)", written=written, count=len(data))
                )
            if defer is None:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        if defer is not None:
            defer.add(fd)  # flushed (and closed) by the caller once the scope lock is released
        else:
            os.close(fd)
        if new_file:
            fileio.fsync_dir(self.dir)
        self._appends += 1
        day = _today()
        if self._appends % 500 == 1 or day != self._pruned_day:
            self._pruned_day = day
            self._due = True

    def tidy(self) -> None:
        """`prune` if appends made it due (the first of a process or of a new day, then every 500).
        Call it outside any scope lock: a compaction rewrites whole segments. Errors are swallowed."""
        if not self._due:
            return
        self._due = False
        with contextlib.suppress(OSError):
            self.prune()

    def _open_segment(self) -> tuple[int, bool]:
        """A descriptor (``O_RDWR | O_APPEND``) of today's last segment, and whether we created it;
        the next number when it is full or not a regular file (skipped with one WARNING)."""
        day = _today()
        n = max((_segment_key(name)[1] for name in self._segments() if _segment_key(name)[0] == day), default=0)
        for _ in range(64):
            path = os.path.join(self.dir, _segment_name(day, n))
            try:
                fd = fileio.open_regular(path, follow=False, append=True)
            except FileNotFoundError:
                try:
                    return fileio.open_regular(path, follow=False, append=True, create=True), True
                except FileExistsError:  # another writer created it meanwhile: open that one
                    continue
            except fileio.NotRegularFile as exc:
                self._warn_once(path, exc)
                n += 1
                continue
            try:
                full = os.fstat(fd).st_size >= self.segment_bytes
            except OSError:
                os.close(fd)
                raise
            if not full:
                return fd, False
            os.close(fd)
            n += 1
        raise OSError(errno.ENOSPC, msg("写入日志没有可用的分段文件"), self.dir)

    def _warn_once(self, path: str, exc: OSError) -> None:
        if self._warned.first(path):
            logger.warning("写入日志分段 %s 不可用(%s),已跳过;请删除或移走它", path, exc.strerror or exc)

    def _segments(self) -> list[str]:
        try:
            names = os.listdir(self.dir)
        except OSError:
            return []
        return sorted((n for n in names if _SEGMENT.match(n)), key=_segment_key)

    # -- scrubbing removed text --------------------------------------------------------------

    def scrub(self) -> None:
        """Overwrite the save lines of records removed since the last call (any process's, as of the
        last `refresh`) by their id and digest; only a line that still is that save is overwritten.

        :raises OSError: a segment could not be written (what is left stays pending).
        """
        with self._lock:
            todo, self._pending = self._pending, []
        by_segment: dict[str, list[tuple[Place, str, str, str]]] = {}
        for item in todo:
            by_segment.setdefault(item[0][0], []).append(item)
        for name, items in by_segment.items():
            try:
                self._scrub_segment(name, items)
            except FileNotFoundError:
                continue  # pruned: nothing left to scrub
            except OSError:
                with self._lock:
                    self._pending.extend(items)
                raise

    def _scrub_segment(self, name: str, items: Sequence[tuple[Place, str, str, str]]) -> None:
        fd = fileio.open_regular(os.path.join(self.dir, name), follow=False, update=True)
        try:
            for (_, offset, length), scope, rid, op in items:
                old = os.pread(fd, length + 1, offset)
                if len(old) != length + 1 or old[-1:] != b"\n":
                    continue
                new = _scrubbed(old[:-1], scope, rid, op)
                if new is not None:
                    fileio.write_all_at(fd, new, offset)
            # No fsync: the removal's line is durable, so a lost write-back is found pending again.
        finally:
            os.close(fd)

    # -- pruning ---------------------------------------------------------------------------

    def prune(self) -> None:
        """Remove segments past `max_age`, then the oldest while over `max_bytes` (never the newest);
        then compact past days' segments (`_compact`)."""
        removed = False
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
            removed = True
        if removed:
            with self._lock:
                self._reset()
        self._compact()

    def _compact(self) -> None:
        """Rewrite the segments of past (UTC) days keeping only the saves still live and not doubtful.

        Today's segments and any modified in the last `_QUIET_SECS` are never rewritten; one that
        changes while it is compacted is left for the next time.
        """
        today = _today()
        old = [name for name in self._segments() if _segment_key(name)[0] < today]
        if not old:
            return
        self.refresh()
        with self._lock:
            doubted = {(d.entry.scope, d.entry.id) for d in self._doubts(None, ())}
            live = {(scope, rid) for scope, entries in self._live.items() for rid in entries} - doubted
            kept_lines: dict[str, int] = {}
            for scope, entries in self._live.items():
                for rid, entry in entries.items():
                    if (scope, rid) in live:
                        for place in entry.places:
                            kept_lines[place[0]] = kept_lines.get(place[0], 0) + 1
            # Only segments holding a line compaction would drop are read and rewritten.
            old = [name for name in old if kept_lines.get(name, 0) != self._offsets.get(name, (0, 0, 0, -1))[3]]
        changed = False
        for name in old:
            path = os.path.join(self.dir, name)
            try:
                fd = fileio.open_regular(path, follow=False)
                with open(fd, "rb") as f:
                    before = os.fstat(f.fileno())
                    data = f.read()
            except OSError:
                continue
            if time.time() - before.st_mtime < _QUIET_SECS:
                continue
            kept = [raw for raw in data.split(b"\n") if raw.strip() and _keeps(raw, live)]
            payload = b"".join(raw + b"\n" for raw in kept)
            if payload == data:
                continue
            try:
                tmp_fd, tmp = fileio.new_tmp(path)
                with fileio.guard(functools.partial(_unchanged, path, before)):
                    fileio.commit(tmp_fd, tmp, path, payload)
            except OSError:
                continue
            changed = True
        if changed:
            with self._lock:
                self._reset()

    # -- reading ---------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read what was appended since the last call (by any process)."""
        with self._lock:
            for _ in range(3):
                names = self._segments()
                if any(name not in names for name in self._offsets):  # pruned meanwhile: start over
                    self._reset()
                if all(self._read_segment(name) for name in names):
                    return
                self._reset()  # a segment was rewritten (compacted): every place we know may have moved

    def _reset(self) -> None:
        self._offsets.clear()
        self._live.clear()
        self._unparsed.clear()
        self._seq = 0
        self._order.clear()
        self._epoch += 1

    def _read_segment(self, name: str) -> bool:
        """Read the new part of one segment (lock held); False when it is no longer the file we read."""
        path = os.path.join(self.dir, name)
        known = self._offsets.get(name)
        if known is not None:
            # Nearly every refresh finds a segment as it was: one lstat, no open (a check runs
            # after every save another writer makes, so this is per call under mixed load).
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return True
            except OSError:
                pass
            else:
                if stat.S_ISREG(st.st_mode) and st.st_ino == known[0] and st.st_size == known[1]:
                    return True
        self.stats["segment_reads"] += 1
        try:
            fd = fileio.open_regular(path, follow=False)
        except FileNotFoundError:
            return True
        except OSError as exc:
            self._warn_once(path, exc)
            return True
        try:
            st = os.fstat(fd)
            inode, start, lineno, count = self._offsets.get(name, (st.st_ino, 0, 0, 0))
            if inode != st.st_ino:
                return False
            if st.st_size <= start:
                return st.st_size == start  # shorter: not the file we read
            data = fileio.read_from(fd, start)
        finally:
            os.close(fd)
        end = data.rfind(b"\n") + 1  # a line still being written (or torn by a crash) waits
        pos = 0
        for raw in data[:end].split(b"\n")[:-1] if end else ():
            lineno += 1
            if raw and not raw.isspace():
                count += 1
                self._apply(raw, (name, start + pos, len(raw)), lineno)
            pos += len(raw) + 1
        self._offsets[name] = (st.st_ino, start + end, lineno, count)
        return True

    def _apply(self, raw: bytes, place: Place, lineno: int) -> None:
        self._seq += 1
        item = _entry(raw)
        if item is None:
            self._unparsed.append(_Unparsed(place[0], lineno, self._seq, raw))
            return
        scope = item["scope"]
        if item["op"] == "save":
            if "line" not in item:
                return  # a scrubbed save; its removal has (or will have) its own line
            rid = item["id"]
            known = self._live.setdefault(scope, {}).get(rid)
            places = (*known.places, place) if known is not None else (place,)
            at = item.get("t")
            self._live[scope][rid] = Entry(scope, rid, item["line"], at if type(at) is int else 0, places, self._seq)
            self._order.setdefault(scope, []).append(rid)
            return
        live = self._live.get(scope)
        if not live:
            return
        for rid in item["ids"]:
            entry = live.pop(rid, None)
            if entry is not None:
                self._pending.extend((p, scope, rid, item["op"]) for p in entry.places)

    def saved_since(self, scope: str, mark: tuple[int, int]) -> tuple[list[Entry], tuple[int, int]] | None:
        """The live entries of `scope` saved after `mark`, and the new mark; O(what was saved since).

        None when the journal was read afresh since `mark` (pruned, compacted): the caller must
        then look at every live entry (`live_entries`).
        """
        with self._lock:
            if mark[0] != self._epoch:
                return None
            order = self._order.get(scope, [])
            live = self._live.get(scope, {})
            found = [live[rid] for rid in order[mark[1] :] if rid in live]
            return found, (self._epoch, len(order))

    def live_entries(self, scope: str) -> tuple[list[Entry], tuple[int, int]]:
        """Every entry of `scope` saved and never removed (as of the last `refresh`), and the mark
        they go up to."""
        with self._lock:
            return list(self._live.get(scope, {}).values()), (self._epoch, len(self._order.get(scope, ())))

    def live_entry(self, scope: str, record_id: str) -> Entry | None:
        """The live entry of `record_id` in `scope` (as of the last `refresh`), or None."""
        with self._lock:
            return self._live.get(scope, {}).get(record_id)

    def undoubted(self, scope: str, entries: Sequence[Entry]) -> list[Entry]:
        """Those of `entries` still live (as of the last `refresh`) that no later unparseable line
        mentions (`doubtful`): what `missing` would report of them, at the cost of these alone."""
        with self._lock:
            live = self._live.get(scope, {})
            return [e for e in entries if e.id in live and self._doubt(live[e.id]) is None]

    def scopes(self) -> list[str]:
        with self._lock:
            return sorted(scope for scope, live in self._live.items() if live)

    def doubtful(self, scope: str, present: Iterable[str]) -> list[Doubt]:
        """Entries of `scope` not in `present` that a later unparseable line mentions: they may
        have been removed, so they are neither missing nor restored."""
        with self._lock:
            return self._doubts(scope, set(present))

    def _doubts(self, scope: str | None, present: Iterable[str]) -> list[Doubt]:
        """(Lock held.) Doubtful entries of `scope` (None: every scope) whose ids are not in `present`."""
        if not self._unparsed:
            return []
        skip = set(present)
        found: list[Doubt] = []
        for name in [scope] if scope is not None else list(self._live):
            for rid, entry in self._live.get(name, {}).items():
                if rid not in skip and (line := self._doubt(entry)) is not None:
                    found.append(Doubt(entry, line.segment, line.lineno))
        return found

    def _doubt(self, entry: Entry) -> _Unparsed | None:
        """(Lock held.) The first unparseable line after `entry`'s save that mentions its id."""
        return next((line for line in self._unparsed if line.seq > entry.seq and line.mentions(entry.id)), None)


def _entry(raw: bytes) -> dict[str, Any] | None:
    """A journal line as one of the entries we write, or None (torn, glued, edited, unknown op)."""
    text = raw.decode("utf-8", "surrogatepass")
    try:
        item, end = SCAN(text, 0)
    except (ValueError, RecursionError):
        return None
    if type(item) is not dict or (end != len(text) and text[end:].strip(JSON_WS)):
        return None
    if type(item.get("scope")) is not str:
        return None
    op = item.get("op")
    if op == "save":
        if type(item.get("id")) is not str:
            return None
        if "line" in item:
            return item if type(item["line"]) is str else None
        return item if type(item.get("scrubbed")) is str else None
    if op in _REMOVALS:
        ids = item.get("ids")
        if type(ids) is list and all(type(rid) is str for rid in ids):
            return item
    return None


def _scrubbed(old: bytes, scope: str, rid: str, op: str) -> bytes | None:
    """The same-length replacement of save line `old` of `rid` without its text, or None when
    `old` is not (or no longer) such a line."""
    item = _entry(old)
    if item is None or item["op"] != "save" or item["id"] != rid or item["scope"] != scope or "line" not in item:
        return None
    digest = hashlib.sha256(item["line"].encode("utf-8", "surrogatepass")).hexdigest()
    short = {"t": item.get("t"), "op": "save", "scope": scope, "id": rid, "scrubbed": op}
    for candidate in ({**short, "sha256": digest}, short, {}):
        new = json.dumps(candidate, ensure_ascii=False).encode("utf-8", "surrogatepass")
        if len(new) <= len(old):
            return new + b" " * (len(old) - len(new))
    return None


def _keeps(raw: bytes, live: set[tuple[str, str]]) -> bool:
    """Whether a journal line of a past day survives compaction: only saves still live."""
    item = _entry(raw)
    return item is not None and item["op"] == "save" and "line" in item and (item["scope"], item["id"]) in live


def _unchanged(path: str, before: os.stat_result) -> None:
    """A compaction's pre-rename check: the segment is still the file it read."""
    now = os.stat(path, follow_symlinks=False)
    if (now.st_ino, now.st_size, now.st_mtime_ns) != (before.st_ino, before.st_size, before.st_mtime_ns):
        raise OSError(errno.EAGAIN, msg("写入日志分段在整理期间被修改"), path)


def _today() -> str:
    return time.strftime("%Y%m%d", time.gmtime())
