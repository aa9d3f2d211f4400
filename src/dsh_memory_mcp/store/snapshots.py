"""Parsed versions of scope files, cached by file identity so an unchanged file is never re-parsed.

Parsing is the expensive part of a read, so a snapshot is cached by file identity
``(st_dev, st_ino, st_size, st_mtime_ns)``. Readers never lock: a scope file is replaced whole or
appended to, so a read sees one consistent version (one that keeps changing while we read it is
read again, and after a few tries used uncached).
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_memory_mcp.errors import StoreError
from dsh_memory_mcp.store import records, scopes
from dsh_memory_mcp.store.layout import StoreLayout
from dsh_memory_mcp.store.records import CorruptLine, Line, Record

__all__ = ["Identity", "ScopeSnapshot", "SnapshotCache", "identity_of", "stat_identity"]

logger = logging.getLogger("dsh_memory_mcp.store.snapshots")

Identity = tuple[int, int, int, int]

# Characters `surrogateescape` produces for bytes that are not UTF-8.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
#: A file that keeps changing while we read it is re-read this many times before we give up
#: caching it.
MAX_REREADS = 5

_reported: set[tuple[str, str]] = set()
_reported_lock = threading.Lock()


@dataclass(frozen=True)
class ScopeSnapshot:
    """One version of one scope file, parsed once and shared by every reader while it lasts."""

    scope: str
    path: str
    #: ``(st_dev, st_ino, st_size, st_mtime_ns)``; None when the file does not exist.
    identity: tuple[int, int, int, int] | None
    #: Every line, corrupt ones included, in file order.
    lines: tuple[Line, ...]
    #: The parseable lines, in file order.
    records: tuple[Record, ...]
    #: Derived data (lexical index, vectors) valid while the file is unchanged.
    cache: dict[str, Any] = field(default_factory=dict, compare=False)


def stat_identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def identity_of(path: str) -> Identity | None:
    """The file's identity now; None when it does not exist.

    :raises StoreError: it exists but cannot be stat-ed.
    """
    try:
        return stat_identity(os.stat(path))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"无法读取记忆文件 {path}:{exc.strerror or exc}。", path=path) from exc


#: Derived data a new version of a scope file may start from, and the key it gets there. After a
#: touch or an append the old records are a prefix of the new ones, so the lexical index can be
#: extended instead of rebuilt (`scoring.index_for`): at 50k records that is ~0.25 s, not ~2.5 s.
_CARRY_FORWARD = {"lexical": "lexical_previous"}


def carry_forward(old: ScopeSnapshot | None, new: ScopeSnapshot) -> None:
    if old is None or old.scope != new.scope:
        return
    for key, dest in _CARRY_FORWARD.items():
        value = old.cache.get(key)
        if value is not None:
            new.cache[dest] = value


def decode(data: bytes) -> tuple[str, bool]:
    """The text of a scope file, and whether it needed ``surrogateescape`` (bytes not UTF-8)."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        # Only then can a line hold escaped bytes; scanning every text for them cost ~50 ms at 10k.
        return data.decode("utf-8", "surrogateescape"), True


def parse(path: str, text: str, escaped: bool, previous: ScopeSnapshot | None = None) -> list[Line]:
    """Every non-blank line of a scope file, each keeping its exact text.

    Lines unchanged since `previous` (the last version we read or wrote) are reused as they
    are, so a re-read after another process's save parses only what it changed.

    Bytes that are not UTF-8 are decoded with ``surrogateescape`` (`escaped`) so they are
    written back unchanged; a line containing such bytes is kept as a `CorruptLine` (never
    modified, never dropped) rather than a record we might re-serialise differently.
    """
    known = {r.raw: r for r in previous.records} if previous is not None else None
    lines = records.parse_lines(text, known)
    if escaped:
        numbers = {raw: n for n, raw in enumerate(text.split("\n"), start=1)}
        for i, line in enumerate(lines):
            if isinstance(line, Record) and _ESCAPED_BYTE.search(line.raw):
                lines[i] = CorruptLine(line.raw, numbers.get(line.raw, 0))
    for line in lines:
        if isinstance(line, CorruptLine):
            report_corrupt(path, line)
    return lines


def report_corrupt(path: str, line: CorruptLine) -> None:
    """Warn once per process per distinct line: a scope file is re-read often."""
    key = (path, line.raw)
    with _reported_lock:
        if key in _reported:
            return
        _reported.add(key)
    preview = line.raw if len(line.raw) <= 80 else line.raw[:80] + "…"
    logger.warning("记忆文件 %s 第 %d 行不是有效记录,已原样保留(不会删除):%r", path, line.lineno, preview)


def make(path: str, scope: str, identity: Identity | None, lines: Sequence[Line]) -> ScopeSnapshot:
    return ScopeSnapshot(
        scope=scope,
        path=path,
        identity=identity,
        lines=tuple(lines),
        records=tuple(line for line in lines if isinstance(line, Record)),
    )


class SnapshotCache:
    """The latest snapshot of every scope file this process has read or written, by path.

    Thread-safe. `load` is lock-free with respect to other processes; `put` records a version
    this process just wrote (so it is not read back).
    """

    def __init__(self, layout: StoreLayout) -> None:
        self.layout = layout
        self._cache: dict[str, ScopeSnapshot] = {}  # path → latest snapshot
        self._lock = threading.Lock()

    def get(self, path: str) -> ScopeSnapshot | None:
        with self._lock:
            return self._cache.get(path)

    def load(self, path: str, scope: str | None) -> ScopeSnapshot:
        """The cached snapshot of `path` if its identity is unchanged, else a fresh parse.

        `scope` None (discovery) takes the scope from the records (the one whose sha1 is the
        file name) and gives it as ``""`` when none matches.
        """
        data = b""
        identity: Identity | None = None
        for _ in range(MAX_REREADS):
            identity = identity_of(path)
            if identity is None:
                return self._remember(path, scope or "", None, [])
            cached = self.get(path)
            if cached is not None and cached.identity == identity and (scope is None or cached.scope == scope):
                return cached
            try:
                with open(path, "rb") as f:
                    before = stat_identity(os.fstat(f.fileno()))
                    data = f.read()
                    after = stat_identity(os.fstat(f.fileno()))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(f"无法读取记忆文件 {path}:{exc.strerror or exc}。", path=path) from exc
            if before == after and len(data) == after[2]:
                text, escaped = decode(data)
                data = b""  # drop the bytes before parsing: ~20 MB less peak memory at 50k records
                return self._remember(path, scope, after, parse(path, text, escaped, cached))
        # The file kept changing under us (an unlocked writer): use the last read, uncached.
        lines = parse(path, *decode(data))
        return make(path, scope if scope is not None else self.scope_of(path, lines), identity, lines)

    def _remember(self, path: str, scope: str | None, identity: Identity | None, lines: list[Line]) -> ScopeSnapshot:
        if scope is None:
            scope = self.scope_of(path, lines)
        with self._lock:
            cached = self._cache.get(path)
            if cached is not None and cached.identity == identity and cached.scope == scope:
                return cached  # another thread parsed the same version meanwhile: share it
            snap = make(path, scope, identity, lines)
            carry_forward(cached, snap)
            self._cache[path] = snap
            return snap

    def put(self, snap: ScopeSnapshot) -> None:
        """Cache a version this process wrote, carrying the previous version's derived data."""
        with self._lock:
            carry_forward(self._cache.get(snap.path), snap)
            self._cache[snap.path] = snap

    def scope_of(self, path: str, lines: Sequence[Line]) -> str:
        """The scope key of a discovered file: a record's ``scope`` whose file name is this one."""
        expected = self.layout.relpath(path)
        for line in lines:
            if isinstance(line, Record) and line.scope and scopes.scope_file_relpath(line.scope) == expected:
                return line.scope
        return ""
