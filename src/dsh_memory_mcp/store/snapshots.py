"""Parsed versions of scope files, cached by file identity ``(st_dev, st_ino, st_size, st_mtime_ns)``
so an unchanged file is never re-parsed and one that only grew is extended (docs/design.md: Big
scopes). Readers never lock: a scope file is replaced whole or appended to.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import logging
import os
import threading
import time
from array import array
from collections import Counter, OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp.store import fileio, records, scopes
from dsh_memory_mcp.store.foreground import Foreground
from dsh_memory_mcp.store.layout import StoreLayout
from dsh_memory_mcp.store.records import CorruptLine, Line, Record
from dsh_memory_mcp.store.redact import Once, redacted
from dsh_memory_mcp.store.writing import unreadable

if TYPE_CHECKING:
    from dsh_memory_mcp.store.journal import Entry

logger = logging.getLogger("dsh_memory_mcp.store.snapshots")

Identity = tuple[int, int, int, int]

#: A file that keeps changing while it is read (or written: `SharedStore._locked`) is tried this often.
MAX_REREADS = 5

#: ``(path, line)`` of the corrupt lines warned about (a scope file is re-read often).
_reported = Once(limit=100_000)


#: Bytes of a discovered file read to learn its scope from its first records (`SnapshotCache.scope_name`).
NAME_HEAD_BYTES = 64 * 1024

#: Bytes of the file's start and end a snapshot keeps, to recognise a later version that only grew.
PROBE_BYTES = 4096

#: How often the expensive derivations ran in this process (tests and the benchmark read these):
#: ``id_index_builds`` and ``content_index_builds`` are full builds over every record of a version.
COUNTERS: Counter[str] = Counter()

# Lineage tokens: a version parsed whole (or written by another program) starts a new lineage; a
# version that only grew from one, or that this process wrote from one, inherits it (`lineage`).
_LINEAGES = itertools.count(1)


_ROWS_LOCK = threading.Lock()


class Rows(Sequence[Any]):
    """The first `n` items of an append-only list that the versions of one file share, so a
    version that only grew costs O(new), not a copy. A view never changes (items past its `n` are
    invisible to it); it compares equal to any sequence of the same items.
    """

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Any], n: int) -> None:
        self._items = items
        self._n = n

    @classmethod
    def of(cls, items: Iterable[Any]) -> Rows:
        values = list(items)
        return cls(values, len(values))

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self._items[slice(*index.indices(self._n))])
        n = self._n
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("Rows index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Any]:
        return itertools.islice(self._items, self._n)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rows):
            if other._items is self._items:
                return other._n == self._n
            return other._n == self._n and all(a is b or a == b for a, b in zip(self, other, strict=True))
        if isinstance(other, (tuple, list)):
            return len(other) == self._n and all(a is b or a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Rows({list(self)!r})"

    def __add__(self, other: Iterable[Any]) -> tuple[Any, ...]:
        return (*self, *other)

    def extended(self, new: Sequence[Any]) -> Rows:
        """This view plus `new`: in place when nothing was appended past this view, else a copy."""
        if not new:
            return self
        with _ROWS_LOCK:
            if len(self._items) == self._n:
                self._items.extend(new)
                return Rows(self._items, self._n + len(new))
        items = self._items[: self._n]
        items.extend(new)
        return Rows(items, len(items))

    def prefix(self, n: int) -> Rows:
        """The view of this view's first `n` items (the same list)."""
        return Rows(self._items, min(n, self._n))

    def starts_with(self, prefix: Sequence[Any]) -> bool:
        """Whether this view begins with exactly the objects of `prefix` (O(1) for a shorter view of
        the same list)."""
        n = len(prefix)
        if n > self._n:
            return False
        if isinstance(prefix, Rows) and prefix._items is self._items:
            return True
        return all(a is b for a, b in zip(itertools.islice(self._items, n), prefix, strict=True))


@dataclass(frozen=True)
class ScopeSnapshot:
    """One version of one scope file, parsed once and shared by every reader while it lasts."""

    scope: str
    path: str
    #: ``(st_dev, st_ino, st_size, st_mtime_ns)``; None when the file does not exist.
    identity: tuple[int, int, int, int] | None
    #: Every line, corrupt ones included, in file order.
    lines: Sequence[Line]
    #: The parseable lines, in file order.
    records: Sequence[Record]
    #: Derived data (lexical index, vectors) valid while the file is unchanged.
    cache: dict[str, Any] = field(default_factory=dict, compare=False)
    #: The first and the last `PROBE_BYTES` bytes of this version, to recognise a later one that
    #: only grew (`SnapshotCache._extend`).
    head: bytes = field(default=b"", compare=False, repr=False)
    tail: bytes = field(default=b"", compare=False, repr=False)
    #: Newline characters in the file (the last line number of a complete file).
    newlines: int = field(default=0, compare=False)
    #: Shared by versions that descend from one another without losing an unjournalled line
    #: (appends, our own rewrites under the lock); a version parsed whole starts a new one.
    lineage: int = field(default=0, compare=False)

    @property
    def torn(self) -> bool:
        """The file does not end with a newline: its last line is unfinished (a crashed writer)."""
        return bool(self.tail) and not self.tail.endswith(b"\n")

    def grew_into(self, identity: Identity) -> bool:
        """Whether `identity` may be this version grown by appends (the same inode, longer); never
        for a version that is torn or was not read from a file."""
        return (
            self.identity is not None
            and bool(self.tail)
            and not self.torn
            and self.identity[:2] == identity[:2]
            and identity[2] > self.identity[2]
        )


_Found = Record | tuple[Record, ...]


def _add(table: dict[int, _Found], key: int, rec: Record) -> None:
    found = table.get(key)
    table[key] = rec if found is None else (*found, rec) if isinstance(found, tuple) else (found, rec)


def _as_tuple(found: _Found | None) -> tuple[Record, ...]:
    return () if found is None else found if isinstance(found, tuple) else (found,)


class ContentIndex:
    """Stripped content → the records holding it, in file order: exact dedupe without a scan.

    Keyed by the hash of the text (candidates are compared by text: no copy of every text kept).
    Persistent: `extended` shares this one's base and adds a small overlay, merged once past an
    eighth of the base, so an append costs O(overlay) and older snapshots keep a valid index.
    """

    __slots__ = ("_base", "_overlay", "size")

    def __init__(self, base: dict[int, _Found], overlay: dict[int, _Found], size: int) -> None:
        self._base = base
        self._overlay = overlay
        self.size = size  # how many records it covers (a prefix of its snapshot's records)

    @classmethod
    def build(cls, recs: Sequence[Record]) -> ContentIndex:
        base: dict[int, _Found] = {}
        for rec in recs:
            _add(base, hash(rec.content.strip()), rec)
        return cls(base, {}, len(recs))

    def extended(self, recs: Sequence[Record]) -> ContentIndex:
        overlay = dict(self._overlay)
        for rec in recs:
            _add(overlay, hash(rec.content.strip()), rec)
        if len(overlay) * 8 <= max(len(self._base), 1024):
            return ContentIndex(self._base, overlay, self.size + len(recs))
        base = dict(self._base)
        for key, found in overlay.items():
            for rec in _as_tuple(found):
                _add(base, key, rec)
        return ContentIndex(base, {}, self.size + len(recs))

    def get(self, key: str) -> tuple[Record, ...]:
        """The records whose stripped content is `key`, in file order."""
        h = hash(key)
        found = _as_tuple(self._base.get(h)) + _as_tuple(self._overlay.get(h))
        return tuple(r for r in found if r.content.strip() == key) if found else ()


#: Key of the `ContentIndex` in `snapshot.cache`.
CONTENT_KEY = "content"
CONTENT_LOCK_KEY = "content_build_lock"


def content_index(snap: ScopeSnapshot) -> ContentIndex:
    """The snapshot's content index, built on first use (O(n) once per version that is not an append)."""
    index = snap.cache.get(CONTENT_KEY)
    if isinstance(index, ContentIndex) and index.size == len(snap.records):
        return index
    with snap.cache.setdefault(CONTENT_LOCK_KEY, threading.Lock()):  # one build (a save and the warm-up)
        index = snap.cache.get(CONTENT_KEY)
        if not isinstance(index, ContentIndex) or index.size != len(snap.records):
            COUNTERS["content_index_builds"] += 1
            index = ContentIndex.build(snap.records)
            snap.cache[CONTENT_KEY] = index
    return index


def find_live_content(
    snap: ScopeSnapshot, content: str, now: int, *, exclude: Container[str | None] = ()
) -> Record | None:
    """The first non-expired record whose stripped content is `content` (stripped), or None;
    `exclude`: ids that do not count (the records a save supersedes)."""
    return next(
        (r for r in content_index(snap).get(content.strip()) if not r.is_expired(now) and r.id not in exclude), None
    )


def stat_identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def identity_of(path: str) -> Identity | None:
    """The file's identity now; None when it does not exist. :raises StoreError: it cannot be stat-ed."""
    st = _stat_of(path)
    return stat_identity(st) if st is not None else None


#: `ScopeSnapshot.cache` key: the file's change time when this version was first seen current.
_CTIME = "ctime"


def _unchanged_since_seen(snap: ScopeSnapshot, st: os.stat_result) -> bool:
    """Whether the file's change time is the one this version was first seen with. A same-size
    edit in place that puts the old mtime back keeps the identity, not the change time (setting
    the mtime sets it). The first look at a version trusts it: an edit between the read (or our
    write, whose rename changes the change time) and that look is not noticed."""
    seen: int = snap.cache.setdefault(_CTIME, st.st_ctime_ns)
    return seen == st.st_ctime_ns


def _stat_of(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise unreadable(path, exc) from exc


#: Derived data a new version of a scope file may start from (extended, not rebuilt), and its key there.
_CARRY_FORWARD = {
    "lexical": "lexical_previous",
    "ids": "ids_previous",
    "writers": "writers_previous",
}
#: Who wrote each record (`service.browse.writers`), and the previous version's table it reuses.
WRITERS_KEY, WRITERS_PREVIOUS_KEY = "writers", "writers_previous"


def carry_forward(old: ScopeSnapshot | None, new: ScopeSnapshot) -> None:
    """Seed `new` with what `old` derived, or with `old`'s own seed when nobody used it (a version
    nobody searched must pass the seed on, or the next search rebuilds the whole index)."""
    if old is None or old.scope != new.scope:
        return
    for key, dest in _CARRY_FORWARD.items():
        value = old.cache.get(key)
        if value is None:
            value = old.cache.get(dest)
        if value is not None:
            new.cache[dest] = value


def parse(path: str, data: bytes, known: Mapping[bytes, Record] | None = None, lineno_offset: int = 0) -> list[Line]:
    """The non-blank lines of these bytes of a scope file (`records.parse_bytes`), corrupt ones
    numbered from `lineno_offset` and reported once per process."""
    lines = records.parse_bytes(data, known)
    for i, line in enumerate(lines):
        if isinstance(line, CorruptLine):
            lines[i] = line = CorruptLine(line.raw, line.lineno + lineno_offset)
            if _reported.first((path, line.raw)):
                # Shape only (keys, punctuation, the id): the log must not carry memory text.
                logger.warning(
                    "记忆文件 %s 第 %d 行不是有效记录,已原样保留(不会删除):%d 字符,形如 %s",
                    path,
                    line.lineno,
                    len(line.raw),
                    redacted(line.raw),
                )
    return lines


def make(
    path: str,
    scope: str,
    identity: Identity | None,
    lines: Sequence[Line],
    *,
    head: bytes = b"",
    tail: bytes = b"",
    newlines: int = 0,
    lineage: int | None = None,
) -> ScopeSnapshot:
    """A snapshot of these lines; `lineage` that of the version it descends from, else a new one."""
    return ScopeSnapshot(
        scope=scope,
        path=path,
        identity=identity,
        lines=Rows.of(lines),
        records=Rows.of(line for line in lines if isinstance(line, Record)),
        head=head,
        tail=tail,
        newlines=newlines,
        lineage=next(_LINEAGES) if lineage is None else lineage,
    )


def _rows(items: Sequence[Any]) -> Rows:
    return items if isinstance(items, Rows) else Rows.of(items)


def appended(
    old: ScopeSnapshot, identity: Identity, data: bytes, new_lines: Sequence[Line], newlines: int
) -> ScopeSnapshot:
    """`old` plus lines that were appended as `data` (O(new), not O(file)): its derived data is
    carried forward (`carry_forward`), its content index extended here."""
    new_records = tuple(line for line in new_lines if isinstance(line, Record))
    head = old.head if len(old.head) >= PROBE_BYTES else (old.head + data)[:PROBE_BYTES]
    tail = (old.tail + data)[-PROBE_BYTES:] if len(data) < PROBE_BYTES else data[-PROBE_BYTES:]
    snap = ScopeSnapshot(
        scope=old.scope,
        path=old.path,
        identity=identity,
        lines=_rows(old.lines).extended(new_lines),
        records=_rows(old.records).extended(new_records),
        head=head,
        tail=tail,
        newlines=old.newlines + newlines,
        lineage=old.lineage,
    )
    carry_forward(old, snap)
    index = old.cache.get(CONTENT_KEY)
    if isinstance(index, ContentIndex) and index.size == len(old.records):
        snap.cache[CONTENT_KEY] = index.extended(new_records)
    return snap


class IdIndex:
    """Lower-cased ids in sorted order with their positions: an id or id prefix found by bisection.

    Built once per file version (`COUNTERS["id_index_builds"]`); a version that only grew gets a
    small sorted overlay of the new ids (merged once past an eighth of the base), and one that
    kept every id in place (a touch flush) reuses the tables.
    """

    __slots__ = ("_extra", "_keys", "_positions", "source")

    def __init__(
        self, keys: list[str], positions: array[int], extra: list[tuple[str, int]], source: Sequence[Record]
    ) -> None:
        self._keys = keys  # sorted, for the records the base covers; never mutated once built
        self._positions = positions
        self._extra = extra  # sorted (key, position) of records appended since the base
        self.source = source

    @staticmethod
    def _key(record: Record) -> str:
        rid = record.id
        low = rid.lower()
        return rid if low == rid else low  # share the id's own string when it is already lower case

    @classmethod
    def build(cls, recs: Sequence[Record]) -> IdIndex:
        COUNTERS["id_index_builds"] += 1
        key = cls._key
        pairs = sorted((key(r), i) for i, r in enumerate(recs))
        return cls([k for k, _ in pairs], array("l", (i for _, i in pairs)), [], recs)

    def extended(self, recs: Sequence[Record]) -> IdIndex:
        """This index for `recs`, whose first records are this index's source, unchanged."""
        start = self.size
        key = self._key
        added = sorted((key(recs[i]), i) for i in range(start, len(recs)))
        if not self._extra:
            extra = added
        else:
            extra = list(self._extra)
            for pair in added:
                bisect.insort(extra, pair)
        if len(extra) * 8 <= max(len(self._keys), 2048):
            return IdIndex(self._keys, self._positions, extra, recs)
        pairs = sorted([*zip(self._keys, self._positions, strict=True), *extra])
        return IdIndex([k for k, _ in pairs], array("l", (i for _, i in pairs)), [], recs)

    def reused(self, recs: Sequence[Record]) -> IdIndex:
        """The same tables for another version whose records have the very same ids in place."""
        return IdIndex(self._keys, self._positions, self._extra, recs)

    @property
    def size(self) -> int:
        return len(self._keys) + len(self._extra)

    def matching(self, prefix: str) -> list[int]:
        """Positions (file order) of the records whose lower-cased id starts with `prefix`."""
        keys = self._keys
        i = bisect.bisect_left(keys, prefix)
        found = []
        while i < len(keys) and keys[i].startswith(prefix):
            found.append(self._positions[i])
            i += 1
        extra = self._extra
        j = bisect.bisect_left(extra, (prefix,))
        while j < len(extra) and extra[j][0].startswith(prefix):
            found.append(extra[j][1])
            j += 1
        return sorted(found)

    def has(self, record_id: str) -> bool:
        """Whether a record with exactly this id (case included) is in the source."""
        source = self.source
        return any(source[pos].id == record_id for pos in self.matching(record_id.lower()))


#: How many records from the end of a version `absent` looks through before it asks the id index.
RECENT = 2048


def absent(snap: ScopeSnapshot, wanted: Sequence[Entry], *, recent_only: bool = False) -> list[Entry]:
    """The journal entries of `wanted` whose id no record of `snap` has.

    Looked for first among the last `RECENT` records (the loss check asks about saves made a
    moment ago), then in the id index. `recent_only`: stop after those; what is returned may then
    be further up.
    """
    if not wanted:
        return []
    recs = snap.records
    cached = snap.cache.get("ids")
    if not (isinstance(cached, IdIndex) and cached.source is recs):
        left = {item.id for item in wanted}
        for i in range(len(recs) - 1, max(-1, len(recs) - 1 - RECENT), -1):
            rid = recs[i].id
            if rid in left:
                left.discard(rid)
                if not left:
                    return []
        wanted = [item for item in wanted if item.id in left]
        if recent_only or len(recs) <= RECENT:
            return wanted
    index = id_index(snap)
    return [item for item in wanted if not index.has(item.id)]


def _same_ids(a: Sequence[Record], b: Sequence[Record]) -> bool:
    return len(a) == len(b) and all(x is y or x.id == y.id for x, y in zip(a, b, strict=True))


def id_index(snap: ScopeSnapshot) -> IdIndex:
    """The snapshot's id index: cached, else extended from (or reused from) the previous version's,
    else built."""
    index = snap.cache.get("ids")
    if isinstance(index, IdIndex) and index.source is snap.records:
        return index
    previous = snap.cache.get("ids_previous")
    recs = snap.records
    if isinstance(previous, IdIndex) and previous.size <= len(recs) and _rows(recs).starts_with(previous.source):
        index = previous.extended(recs) if previous.size < len(recs) else previous.reused(recs)
    elif isinstance(previous, IdIndex) and _same_ids(previous.source, recs):
        index = previous.reused(recs)
    else:
        index = IdIndex.build(recs)
    snap.cache["ids"] = index
    snap.cache.pop("ids_previous", None)
    return index


#: Pauses (seconds) before a last line without its newline counts as torn (a writer killed mid-line)
#: rather than as an append still being copied in (a write becomes visible page by page).
_UNTERMINATED_RECHECKS = (0.001, 0.002, 0.004)


def _stays_unterminated(fd: int, size: int) -> bool:
    """Whether the file behind `fd` stays `size` bytes long for a few milliseconds."""
    for pause in _UNTERMINATED_RECHECKS:
        time.sleep(pause)
        if os.fstat(fd).st_size != size:
            return False
    return True


#: A scope file is read and parsed in pieces of this many bytes (cut at a newline), bounding memory.
READ_CHUNK = 1 << 20


@dataclass
class _Read:
    """Lines parsed from a file from some offset on, and what a snapshot needs to know of them."""

    lines: list[Line]
    #: ``(dev, ino, bytes covered, mtime_ns)``: the file as far as it was read (see `_read_lines`).
    identity: Identity
    head: bytes
    tail: bytes
    #: The first and last `PROBE_BYTES` of the bytes read (all of them when fewer), for `appended`.
    probe: bytes
    newlines: int


def _read_lines(
    path: str,
    f: Any,
    start: int,
    known: Mapping[bytes, Record] | None,
    lineno_offset: int,
    *,
    probes: tuple[bytes, bytes] | None = None,
    pause: Callable[[], object] | None = None,
) -> _Read | None:
    """Parse the lines of the open file `f` from `start` up to its size when opened, in `READ_CHUNK`
    pieces (the identity says how far it went); None: it shrank or the bytes read changed meanwhile.

    A last line without its newline is an append still being copied in when the file grew past it
    (left for the next read), else a torn line once it stayed so (`_stays_unterminated`). `probes`:
    head and tail of the version the bytes from `start` extend. `pause` is called between pieces.
    """
    fd = f.fileno()
    st = os.fstat(fd)
    size = st.st_size
    if size < start:
        return None
    f.seek(start)
    lines: list[Line] = []
    head, tail = (b"", b"") if probes is None else probes
    first = b""
    last = b""
    newlines = 0
    pos = start
    rest = b""
    while pos < size:
        chunk = f.read(min(READ_CHUNK, size - pos))
        if not chunk:
            return None  # it shrank while we read
        pos += len(chunk)
        buf = rest + chunk if rest else chunk
        cut = buf.rfind(b"\n") + 1
        rest = buf[cut:]
        if not cut:
            continue
        done = buf[:cut]
        if len(first) < PROBE_BYTES:
            first = (first + done)[:PROBE_BYTES]
        last = (last + done)[-PROBE_BYTES:] if len(done) < PROBE_BYTES else done[-PROBE_BYTES:]
        lines.extend(parse(path, done, known, lineno_offset + newlines))
        newlines += done.count(b"\n")
        if pause is not None and pos < size:
            pause()
    after = os.fstat(fd)
    if (after.st_dev, after.st_ino) != (st.st_dev, st.st_ino) or after.st_size < size:
        return None
    covered = pos
    if rest:
        if after.st_size > size:
            covered -= len(rest)  # an append being copied in: the next read takes it whole
            rest = b""
        elif _stays_unterminated(fd, size):
            lines.extend(parse(path, rest, known, lineno_offset + newlines))
            first = (first + rest)[:PROBE_BYTES] if len(first) < PROBE_BYTES else first
            last = (last + rest)[-PROBE_BYTES:]
        else:
            return None
    length = covered - start
    probe = first if length <= PROBE_BYTES else first + last[-(min(length, 2 * PROBE_BYTES) - PROBE_BYTES) :]
    if start == 0:
        head, tail = first, last
    elif length:
        head = head if len(head) >= PROBE_BYTES else (head + probe)[:PROBE_BYTES]
        tail = (tail + last)[-PROBE_BYTES:]
    if (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns) and length:
        # It changed while we read: an append leaves what we parsed in place, a rewrite in place
        # (same inode) would not: its start and the end of what we read must read the same again.
        f.seek(0)
        if f.read(len(head)) != head:
            return None
        f.seek(covered - len(last))
        if f.read(len(last)) != last:
            return None
    return _Read(lines, (st.st_dev, st.st_ino, covered, st.st_mtime_ns), head, tail, probe, newlines)


class _Parsing:
    """The whole-read lock of one file, with how many threads use it and how many wait for it."""

    __slots__ = ("lock", "users", "waiting")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.waiting = 0

    def waited_for(self) -> bool:
        return self.waiting > 0


class SnapshotCache:
    """The latest snapshot of scope files this process read or wrote, by path; thread-safe. `put`
    records a version this process wrote (not read back). Past `max_entries` files or `max_records`
    records the least recently used are dropped (never the one just used)."""

    def __init__(
        self,
        layout: StoreLayout,
        *,
        max_entries: int = 256,
        max_records: int = 400_000,
    ) -> None:
        self.layout = layout
        self.max_entries = max_entries
        self.max_records = max_records
        self._cache: OrderedDict[str, ScopeSnapshot] = OrderedDict()  # path → latest snapshot
        self._records = 0
        self._scope_names: dict[str, tuple[Identity, str]] = {}  # path → (identity, scope) for discovery
        self._lock = threading.Lock()
        self._extending = threading.Lock()  # one extension at a time: two would copy the shared rows
        self._parsing: dict[str, _Parsing] = {}  # path → its whole read's lock, while anyone uses it
        #: How the last loads were served (tests and the benchmark read these).
        self.stats = {"hits": 0, "extends": 0, "parses": 0, "evictions": 0}

    def get(self, path: str) -> ScopeSnapshot | None:
        with self._lock:
            snap = self._cache.get(path)
            if snap is not None:
                self._cache.move_to_end(path)
            return snap

    def __len__(self) -> int:
        return len(self._cache)

    def _store(self, snap: ScopeSnapshot) -> None:
        """Insert `snap` as the latest version of its path and evict past the bounds; holds _lock."""
        old = self._cache.pop(snap.path, None)
        if old is not None:
            self._records -= len(old.records)
        self._cache[snap.path] = snap
        self._records += len(snap.records)
        if snap.identity is not None and snap.scope:
            self._scope_names[snap.path] = (snap.identity, snap.scope)
        while len(self._cache) > 1 and (len(self._cache) > self.max_entries or self._records > self.max_records):
            _, dropped = self._cache.popitem(last=False)
            self._records -= len(dropped.records)
            self.stats["evictions"] += 1

    def drop(self, path: str) -> None:
        with self._lock:
            old = self._cache.pop(path, None)
            if old is not None:
                self._records -= len(old.records)

    def scope_name(self, path: str) -> str | None:
        """The scope of a discovered file without keeping it parsed: "" for none, None if unknown."""
        identity = identity_of(path)
        if identity is None:
            return None
        with self._lock:
            known = self._scope_names.get(path)
        if known is not None and known[0] == identity:
            return known[1]
        named = self._scope_from_head(path)
        if named is not None:
            return named
        return self.load(path, None).scope

    def _scope_from_head(self, path: str) -> str | None:
        """The scope a discovery would find, from the file's first `NAME_HEAD_BYTES` only (the first
        record naming this file's scope is the first such line of the whole file); None when its
        complete lines name none."""
        try:
            with open(fileio.open_regular(path), "rb") as f:
                identity = stat_identity(os.fstat(f.fileno()))
                head = f.read(NAME_HEAD_BYTES)
        except OSError:
            return None  # the whole read reports it properly
        end = head.rfind(b"\n")
        if end < 0:
            return None
        scope = self.scope_of(path, records.parse_bytes(head[:end]))
        if not scope:
            return None
        with self._lock:
            self._scope_names[path] = (identity, scope)
        return scope

    @contextlib.contextmanager
    def _whole_read(self, path: str) -> Iterator[_Parsing]:
        """Hold `path`'s whole-read lock (one per file: a read never waits for another file's)."""
        with self._lock:
            entry = self._parsing.get(path)
            if entry is None:
                entry = self._parsing[path] = _Parsing()
            entry.users += 1
        try:
            if not entry.lock.acquire(blocking=False):
                with self._lock:
                    entry.waiting += 1
                try:
                    entry.lock.acquire()
                finally:
                    with self._lock:
                        entry.waiting -= 1
            try:
                yield entry
            finally:
                entry.lock.release()
        finally:
            with self._lock:
                entry.users -= 1
                if entry.users == 0 and self._parsing.get(path) is entry:
                    del self._parsing[path]

    def load(self, path: str, scope: str | None, *, yield_to: Foreground | None = None) -> ScopeSnapshot:
        """The cached snapshot of `path` if its identity is unchanged, extended if it only grew
        (`_extend`), else a fresh parse. `scope` None (discovery): taken from the records (`scope_of`).
        `yield_to`: a background read pausing between pieces while calls run, unless another thread
        waits for it."""
        identity: Identity | None = None
        for _ in range(MAX_REREADS):
            st = _stat_of(path)
            if st is None:
                return self._remember(path, scope or "", None)
            identity = stat_identity(st)
            cached = self.get(path)
            if cached is not None and (scope is None or cached.scope == scope):
                if cached.identity == identity:
                    if _unchanged_since_seen(cached, st):
                        self.stats["hits"] += 1
                        return cached
                    self.drop(path)  # edited in place, mtime put back: the same identity, not the same file
                else:
                    grown = self._extend(cached, identity)
                    if grown is not None:
                        return grown
            with self._whole_read(path) as entry:
                # One whole read per file at a time: threads asking at once (a fresh serve's
                # first searches, the digest and a warm-up) wait for it instead of parsing too.
                now = self.get(path)
                if now is not None and now is not cached and (scope is None or now.scope == scope):
                    if now.identity == identity_of(path):
                        self.stats["hits"] += 1
                        return now
                    if now.identity is not None and now.tail and not now.torn:
                        # Another thread read it meanwhile and other writers appended since:
                        # extend that version (the next turn) rather than parse the file again.
                        continue
                try:
                    # Never a FIFO (would block) or a device (a symlink to /dev/zero reads forever).
                    with open(fileio.open_regular(path), "rb") as f:
                        known = {r.raw_bytes: r for r in cached.records} if cached is not None else None
                        pause = None if yield_to is None else functools.partial(yield_to.pause, entry.waited_for)
                        read = _read_lines(path, f, 0, known, 0, pause=pause)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    raise unreadable(path, exc) from exc
                if read is not None:
                    self.stats["parses"] += 1
                    return self._remember(path, scope, read)
        # The file kept changing under us (an unlocked writer): use one plain read, uncached.
        try:
            with open(fileio.open_regular(path), "rb") as f:
                data = f.read()
        except OSError as exc:
            raise unreadable(path, exc) from exc
        lines = parse(path, data)
        return make(path, scope if scope is not None else self.scope_of(path, lines), identity, lines)

    def _extend(self, old: ScopeSnapshot, identity: Identity) -> ScopeSnapshot | None:
        """`old` extended by what was appended to its file since, or None when it did not only grow:
        the same inode, longer, its first and last `PROBE_BYTES` up to the old length unchanged (a
        rewrite changing a line's length fails the end probe). A torn `old` is re-read whole.
        """
        if not old.grew_into(identity):
            return None
        with self._extending:
            current = self.get(old.path)
            if current is not None and current.scope == old.scope and current is not old:
                if current.identity == identity:
                    return current  # another thread extended it to this very version meanwhile
                if current.identity is not None and old.grew_into(current.identity) and current.grew_into(identity):
                    old = current  # extend the newest version, not a copy of an older one
            read = self._read_tail(old)
            if read is None:
                return None
            snap = appended(old, read.identity, read.probe, read.lines, read.newlines)
            with self._lock:
                current = self._cache.get(old.path)
                if current is not None and current.identity == read.identity:
                    return current
                self._store(snap)
            self.stats["extends"] += 1
            return snap

    def _read_tail(self, old: ScopeSnapshot) -> _Read | None:
        """What was appended to `old`'s file since, parsed, or None when the file did not only grow
        (other inode, shorter, or its probes changed)."""
        assert old.identity is not None
        old_size = old.identity[2]
        try:
            with open(fileio.open_regular(old.path), "rb") as f:
                st = os.fstat(f.fileno())
                if (st.st_dev, st.st_ino) != old.identity[:2] or st.st_size <= old_size:
                    return None
                if f.read(len(old.head)) != old.head:
                    return None
                f.seek(old_size - len(old.tail))
                if f.read(len(old.tail)) != old.tail:
                    return None
                return _read_lines(old.path, f, old_size, None, old.newlines, probes=(old.head, old.tail))
        except OSError:
            return None  # let the full read report it

    def _remember(self, path: str, scope: str | None, read: _Read | None) -> ScopeSnapshot:
        """Cache the version `read` whole (None: no file), unless another thread cached it meanwhile."""
        identity = read.identity if read is not None else None
        if scope is None:
            scope = self.scope_of(path, read.lines if read is not None else [])
        with self._lock:
            cached = self._cache.get(path)
            if cached is not None and cached.identity == identity and cached.scope == scope:
                return cached  # another thread parsed the same version meanwhile: share it
            if read is None:
                snap = make(path, scope, None, [])
            else:
                snap = make(path, scope, identity, read.lines, head=read.head, tail=read.tail, newlines=read.newlines)
            carry_forward(cached, snap)
            self._store(snap)
            return snap

    def put(self, snap: ScopeSnapshot, *, carry: bool = True) -> None:
        """Cache a version this process wrote, carrying the previous version's derived data."""
        with self._lock:
            if carry:
                carry_forward(self._cache.get(snap.path), snap)
            self._store(snap)

    def scope_of(self, path: str, lines: Sequence[Line]) -> str:
        """The scope key of a discovered file: a record's ``scope`` whose file name is this one."""
        expected = self.layout.relpath(path)
        for line in lines:
            if isinstance(line, Record) and line.scope and scopes.scope_file_relpath(line.scope) == expected:
                return line.scope
        return ""
