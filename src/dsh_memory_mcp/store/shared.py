"""`SharedStore`: the per-scope JSONL files that many processes and the DSH plugin share.

Layout (SPEC §3): ``global.jsonl``, ``projects/<sha1(scope)>.jsonl``, ``scopes.json`` (aliases),
``.locks/<sha1(name)>.lock``. Several server processes (one per IDE host) and DSH's Node plugin
write the same files at the same time, and nothing may be lost, so:

* Readers never lock. A file is only ever replaced whole (unique tmp in the same directory →
  fsync → ``os.replace``), so a reader sees the old or the new file, never half of one.
* Every read-modify-write takes the scope lock, re-reads the file *inside* it, and only then
  writes. Decisions taken on a lock-free snapshot (dedupe, which scope holds an id) are made
  again on the fresh content.
* Lines this process did not change are written back byte-for-byte (`Record.raw`); unknown fields
  and unparseable lines (`CorruptLine`) survive every rewrite.
* Parsing is the expensive part of a read, so a snapshot is cached by file identity
  ``(st_dev, st_ino, st_size, st_mtime_ns)``: an unchanged file is never read or parsed again.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import logging
import os
import re
import stat
import tempfile
import threading
import unicodedata
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dsh_memory_mcp.errors import DshMemoryError, ScopeError, StoreError
from dsh_memory_mcp.store import fileio, records, scopes
from dsh_memory_mcp.store.locks import LockManager
from dsh_memory_mcp.store.records import CorruptLine, Line, Record

__all__ = ["ALIASES_FILE", "SaveResult", "ScopeSnapshot", "SharedStore"]

logger = logging.getLogger("dsh_memory_mcp.store.shared")

#: The alias file, and the name of the lock guarding it (``.locks/<sha1("scopes.json")>.lock``).
ALIASES_FILE = "scopes.json"

Identity = tuple[int, int, int, int]
T = TypeVar("T")

_SHA1_HEX = re.compile(r"[0-9a-f]{40}")
# Characters `surrogateescape` produces for bytes that are not UTF-8.
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
# A file that keeps changing while we read it is re-read this many times before we give up
# caching it; a transaction re-reads this many times if an unlocked writer changes the file.
_MAX_REREADS = 5

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


@dataclass(frozen=True)
class SaveResult:
    """What `SharedStore.save` did: the record now on disk, and the one it superseded if any."""

    record: Record
    deduped: bool
    superseded: Record | None


def _identity(st: os.stat_result) -> Identity:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


#: Derived data a new version of a scope file may start from, and the key it gets there. After a
#: touch or an append the old records are a prefix of the new ones, so the lexical index can be
#: extended instead of rebuilt (`scoring.index_for`): at 50k records that is ~0.25 s, not ~2.5 s.
_CARRY_FORWARD = {"lexical": "lexical_previous"}


def _carry_forward(old: ScopeSnapshot | None, new: ScopeSnapshot) -> None:
    if old is None or old.scope != new.scope:
        return
    for key, dest in _CARRY_FORWARD.items():
        value = old.cache.get(key)
        if value is not None:
            new.cache[dest] = value


def _identity_of(path: str) -> Identity | None:
    try:
        return _identity(os.stat(path))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"无法读取记忆文件 {path}:{exc.strerror or exc}。", path=path) from exc


def _fold(text: str) -> str:
    """NFKC and lower case: how `delete_matching` compares (full-width ＡＢＣ matches abc)."""
    return unicodedata.normalize("NFKC", text).lower()


#: Lines per write when a scope file is rewritten.
_WRITE_CHUNK = 1000


def _encoded_chunks(lines: Sequence[Line]) -> Iterator[bytes]:
    """The file's bytes in pieces: rendering a 50k-record file into one string and one bytes
    object at once cost ~60 MB of peak memory that glibc then kept."""
    for start in range(0, len(lines), _WRITE_CHUNK):
        chunk = lines[start : start + _WRITE_CHUNK]
        yield records.render_lines(chunk).encode("utf-8", "surrogateescape")


def _atomic_write(path: str, data: bytes | Iterable[bytes]) -> os.stat_result:
    """Replace `path` by `data`: unique tmp in the same directory, fsync, rename, fsync the dir.

    Returns the stat of the written file, taken from the tmp's descriptor *before* the rename:
    a stat after the rename could already include another writer's append, and caching our
    lines under that identity would hide the append. The tmp is 0o600 (`mkstemp`), so is the
    result. On any failure the tmp is removed and the old file is untouched.

    :raises StoreError: from the `OSError`, with the path and the reason in Chinese.
    """
    try:
        fd, tmp = fileio.new_tmp(path)
    except OSError as exc:
        raise StoreError(
            f"写入 {path} 失败:{exc.strerror or exc}。原文件未改动;请检查记忆库目录是否存在且可写。", path=path
        ) from exc
    try:
        return fileio.commit(fd, tmp, path, data)
    except OSError as exc:
        raise StoreError(
            f"写入 {path} 失败:{exc.strerror or exc}。原文件未改动;请检查磁盘空间、文件大小限制与权限。", path=path
        ) from exc


def _decode(data: bytes) -> tuple[str, bool]:
    """The text of a scope file, and whether it needed ``surrogateescape`` (bytes not UTF-8)."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        # Only then can a line hold escaped bytes; scanning every text for them cost ~50 ms at 10k.
        return data.decode("utf-8", "surrogateescape"), True


def _parse(path: str, text: str, escaped: bool, previous: ScopeSnapshot | None = None) -> list[Line]:
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
            _report_corrupt(path, line)
    return lines


def _report_corrupt(path: str, line: CorruptLine) -> None:
    """Warn once per process per distinct line: a scope file is re-read often."""
    key = (path, line.raw)
    with _reported_lock:
        if key in _reported:
            return
        _reported.add(key)
    preview = line.raw if len(line.raw) <= 80 else line.raw[:80] + "…"
    logger.warning("记忆文件 %s 第 %d 行不是有效记录,已原样保留(不会删除):%r", path, line.lineno, preview)


def _display_key(key: object) -> str:
    if isinstance(key, str) and scopes.is_project_key(key):
        return key[len("project:") :]
    return repr(key)


class SharedStore:
    """The store directory: per-scope JSONL files, cached snapshots, atomic rewrites, aliases.

    Constructing one creates nothing on disk; `prepare` does, at server start. Safe to call from
    several threads at once. Writes to one scope are serialised by the scope lock (threads of
    this process and other processes alike); a method never holds two scope locks at once,
    since two processes taking two locks in opposite orders would deadlock each other.

    :param root: the store directory.
    :param lock_timeout: the total wait for a scope lock (SPEC: 10 s → ``LOCK_TIMEOUT``).
    :param clock: milliseconds since the epoch; injectable for tests.
    :param touch_delay: seconds search hits are coalesced before a background flush.
    :param on_delete: called as ``(scope, removed_ids)`` inside the scope lock, right after the
        JSONL file was replaced (the vector channel rewrites its sidecar there). It must not take
        the same scope lock again (`LockRecursion`); its exceptions are logged, not raised.
    """

    def __init__(
        self,
        root: str,
        *,
        lock_timeout: float = 10.0,
        clock: Callable[[], int] = records.now_ms,
        touch_delay: float = 2.0,
        on_delete: Callable[[str, list[str]], None] | None = None,
    ) -> None:
        self.root = os.path.abspath(root)
        self.on_delete = on_delete
        self.touch_delay = touch_delay
        self._clock = clock
        self._locks = LockManager(os.path.join(self.root, ".locks"), timeout=lock_timeout)
        self._cache: dict[str, ScopeSnapshot] = {}  # path → latest snapshot
        self._cache_lock = threading.Lock()
        self._pending: dict[str, dict[str, list[int]]] = {}  # scope → id → [hits, latest hit ms]
        self._touch_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False
        self._atexit: Callable[[], None] | None = None

    # -- layout ----------------------------------------------------------------------------

    def scope_path(self, scope: str) -> str:
        """Absolute path of the scope's JSONL file (it may not exist)."""
        return os.path.join(self.root, *scopes.scope_file_relpath(scope).split("/"))

    def prepare(self) -> None:
        """Create the store, ``projects/`` and ``.locks/`` (0o700) and prove the store writable.

        Only called at server start. An existing directory is used as it is (never chmod-ed:
        DSH or the user chose its mode). Missing parents are *not* created: a typo in
        ``--store-dir`` should be reported, not silently become a new tree.

        :raises StoreError: with a Chinese message naming the path and why it is unusable.
        """
        hint = "请用 --store-dir 或环境变量 DSH_MEMORY_STORE_DIR 指定一个可写的目录。"
        root = self.root

        def fail(path: str, reason: str, exc: BaseException | None = None) -> StoreError:
            err = StoreError(f"记忆库目录不可用:{path} {reason}。{hint}", path=path)
            err.__cause__ = exc
            return err

        for directory in (root, os.path.join(root, "projects"), os.path.join(root, ".locks")):
            try:
                mode: int | None = os.stat(directory).st_mode
            except FileNotFoundError:
                mode = None
            except OSError as exc:
                raise fail(directory, f"无法访问:{exc.strerror or exc}", exc) from exc
            if mode is not None:
                if stat.S_ISDIR(mode):
                    continue
                raise fail(directory, "已存在但不是目录(是一个文件)")
            parent = os.path.dirname(directory)
            try:
                parent_is_dir = stat.S_ISDIR(os.stat(parent).st_mode)
            except FileNotFoundError as exc:
                raise fail(directory, f"的上级目录 {parent} 不存在", exc) from exc
            except NotADirectoryError as exc:
                raise fail(directory, f"的上级路径 {parent} 中有一段不是目录", exc) from exc
            except OSError as exc:
                raise fail(directory, f"的上级目录 {parent} 无法访问:{exc.strerror or exc}", exc) from exc
            if not parent_is_dir:
                raise fail(directory, f"的上级路径 {parent} 不是目录")
            try:
                os.mkdir(directory, 0o700)
            except FileExistsError as exc:
                if not os.path.isdir(directory):  # a dangling symlink, or a file created meanwhile
                    raise fail(directory, "已存在但不是目录", exc) from exc
            except PermissionError as exc:
                raise fail(directory, f"无法创建:没有写权限({exc.strerror})", exc) from exc
            except OSError as exc:
                raise fail(directory, f"无法创建:{exc.strerror or exc}", exc) from exc
        # Every directory we will write to, since an existing one may belong to another user.
        for directory in (root, os.path.join(root, "projects"), os.path.join(root, ".locks")):
            try:
                fd, probe = tempfile.mkstemp(dir=directory, prefix=".probe-", suffix=".tmp")
                try:
                    fileio.write_all(fd, b"ok\n")
                finally:
                    os.close(fd)
                    os.unlink(probe)
            except PermissionError as exc:
                raise fail(directory, f"不可写:没有写权限({exc.strerror})", exc) from exc
            except OSError as exc:
                raise fail(directory, f"不可写:{exc.strerror or exc}", exc) from exc

    # -- reading ---------------------------------------------------------------------------

    def snapshot(self, scope: str) -> ScopeSnapshot:
        """The scope's current content, lock-free; the same object while the file is unchanged.

        A missing file gives an empty snapshot. Never raises for bad content: lines that do not
        parse are kept as `CorruptLine` and reported once.

        :raises StoreError: the file exists but cannot be read (permissions, I/O error).
        """
        return self._load(self.scope_path(scope), scope)

    def _load(self, path: str, scope: str | None) -> ScopeSnapshot:
        """The cached snapshot of `path` if its identity is unchanged, else a fresh parse.

        `scope` None (discovery) takes the scope from the records (the one whose sha1 is the
        file name) and gives it as ``""`` when none matches.
        """
        data = b""
        identity: Identity | None = None
        for _ in range(_MAX_REREADS):
            identity = _identity_of(path)
            if identity is None:
                return self._remember(path, scope or "", None, [])
            with self._cache_lock:
                cached = self._cache.get(path)
            if cached is not None and cached.identity == identity and (scope is None or cached.scope == scope):
                return cached
            try:
                with open(path, "rb") as f:
                    before = _identity(os.fstat(f.fileno()))
                    data = f.read()
                    after = _identity(os.fstat(f.fileno()))
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(f"无法读取记忆文件 {path}:{exc.strerror or exc}。", path=path) from exc
            if before == after and len(data) == after[2]:
                text, escaped = _decode(data)
                data = b""  # drop the bytes before parsing: ~20 MB less peak memory at 50k records
                return self._remember(path, scope, after, _parse(path, text, escaped, cached))
        # The file kept changing under us (an unlocked writer): use the last read, uncached.
        lines = _parse(path, *_decode(data))
        return self._make(path, scope if scope is not None else self._scope_of(path, lines), identity, lines)

    def _remember(self, path: str, scope: str | None, identity: Identity | None, lines: list[Line]) -> ScopeSnapshot:
        if scope is None:
            scope = self._scope_of(path, lines)
        with self._cache_lock:
            cached = self._cache.get(path)
            if cached is not None and cached.identity == identity and cached.scope == scope:
                return cached  # another thread parsed the same version meanwhile: share it
            snap = self._make(path, scope, identity, lines)
            _carry_forward(cached, snap)
            self._cache[path] = snap
            return snap

    @staticmethod
    def _make(path: str, scope: str, identity: Identity | None, lines: Sequence[Line]) -> ScopeSnapshot:
        return ScopeSnapshot(
            scope=scope,
            path=path,
            identity=identity,
            lines=tuple(lines),
            records=tuple(line for line in lines if isinstance(line, Record)),
        )

    def _scope_of(self, path: str, lines: Sequence[Line]) -> str:
        """The scope key of a discovered file: a record's ``scope`` whose file name is this one."""
        expected = os.path.relpath(path, self.root).replace(os.sep, "/")
        for line in lines:
            if isinstance(line, Record) and line.scope and scopes.scope_file_relpath(line.scope) == expected:
                return line.scope
        return ""

    def discover_scopes(self) -> list[str]:
        """Every scope present on disk: ``global`` (if its file exists), then the others sorted.

        A ``projects/*.jsonl`` file only counts if one of its records names a scope whose sha1
        is the file name; empty files and files of unknown origin are skipped.
        """
        found: list[str] = []
        if os.path.isfile(self.scope_path(scopes.GLOBAL)):
            found.append(scopes.GLOBAL)
        projects = os.path.join(self.root, "projects")
        try:
            names = sorted(os.listdir(projects))
        except OSError:
            names = []
        others: set[str] = set()
        for name in names:
            if not name.endswith(".jsonl") or not _SHA1_HEX.fullmatch(name[: -len(".jsonl")]):
                continue
            try:
                snap = self._load(os.path.join(projects, name), None)
            except StoreError as exc:
                logger.warning("跳过无法读取的记忆文件:%s", exc)
                continue
            if snap.scope and snap.scope != scopes.GLOBAL:
                others.add(snap.scope)
        found.extend(sorted(others))
        return found

    def find(self, keys: Sequence[str]) -> dict[str, list[Record]]:
        """Records by full id or id prefix (≥ 8 characters), across every scope, expired included.

        Each key maps to its matches in scope order then file order: one for a full id, maybe
        several for a prefix, none when unknown (or when the key is shorter than 8 characters).
        """
        return {key: [rec for _, rec in hits] for key, hits in self._find(keys).items()}

    def _find(self, keys: Sequence[str]) -> dict[str, list[tuple[str, Record]]]:
        result: dict[str, list[tuple[str, Record]]] = {key: [] for key in keys}
        wanted = {key: key.strip().lower() for key in keys if len(key.strip()) >= 8}
        if not wanted:
            return result
        for scope in self.discover_scopes():
            for rec in self.snapshot(scope).records:
                rid = rec.id.lower()
                for key, prefix in wanted.items():
                    if rid.startswith(prefix):
                        result[key].append((scope, rec))
        return result

    # -- writing ---------------------------------------------------------------------------

    def lock(self, scope: str) -> contextlib.AbstractContextManager[None]:
        """The scope's lock, for other writers of per-scope files (the vector sidecar)."""
        return self._locks.hold(scope)

    def _transact(
        self,
        scope: str,
        mutate: Callable[[ScopeSnapshot], tuple[list[Line] | None, T]],
        after: Callable[[T], None] | None = None,
    ) -> T:
        """One read-modify-write of a scope file under its lock.

        `mutate` gets the content as it is *inside* the lock and returns the new lines (None:
        nothing to write) and a result. Right before writing, the file's identity is checked
        again: a writer that ignores the lock (an old plugin appending) would otherwise have its
        line erased by our replace, so we start over on the new content instead. `after` runs
        inside the lock once the new file is in place.
        """
        path = self.scope_path(scope)
        with self._locks.hold(scope):
            attempt = 0
            while True:
                attempt += 1
                snap = self._load(path, scope)
                new_lines, result = mutate(snap)
                if new_lines is None:
                    return result
                if attempt < _MAX_REREADS and _identity_of(path) != snap.identity:
                    continue
                self._write_lines(scope, path, new_lines)
                if after is not None:
                    after(result)
                return result

    def _write_lines(self, scope: str, path: str, lines: list[Line]) -> None:
        """Replace the scope file by `lines` and cache the result without reading it back."""
        st = _atomic_write(path, _encoded_chunks(lines))
        numbered = [
            CorruptLine(line.raw, n) if isinstance(line, CorruptLine) else line for n, line in enumerate(lines, 1)
        ]
        snap = self._make(path, scope, _identity(st), numbered)
        with self._cache_lock:
            _carry_forward(self._cache.get(path), snap)
            self._cache[path] = snap

    def save(
        self,
        scope: str,
        content: str,
        *,
        kind: str = "note",
        tags: Sequence[str] = (),
        importance: float | None = None,
        supersedes: str | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> SaveResult:
        """Append a record to `scope`, unless a live record there has the same content.

        Dedupe: a non-expired record of that scope whose ``content.strip()`` is the same →
        returned with ``deduped=True``, no line added. `supersedes` (a full id or a prefix of at
        least 8 characters naming exactly one non-expired record in any scope) gets ``expiredAt``
        set to now - 1 ms (readers hide ``expiredAt < now``, so it is hidden at once, even within
        the same millisecond) and ``updatedAt`` to now — also when the save is deduped, since hiding the old record
        is what the caller asked for — in the same transaction when it is in this scope, else in
        a second one afterwards (never two scope locks at once). Arguments are not validated
        here; the tools layer does that.
        """
        target: tuple[str, Record] | None = None
        if supersedes:
            live = {
                (s, r.id): (s, r) for s, r in self._find([supersedes])[supersedes] if not r.is_expired(self._clock())
            }
            if len(live) == 1:
                target = next(iter(live.values()))
        target_id = target[1].id if target is not None else None
        wanted = content.strip()

        def mutate(snap: ScopeSnapshot) -> tuple[list[Line] | None, SaveResult]:
            now = self._clock()
            lines = list(snap.lines)
            existing = next((r for r in snap.records if not r.is_expired(now) and r.content.strip() == wanted), None)
            superseded: Record | None = None
            if target is not None and target[0] == scope and (existing is None or existing.id != target_id):
                for i, line in enumerate(lines):
                    if isinstance(line, Record) and line.id == target_id and not line.is_expired(now):
                        superseded = lines[i] = line.with_changes(expiredAt=now - 1, updatedAt=now)
                        break
            if existing is not None:
                return (lines if superseded is not None else None), SaveResult(existing, True, superseded)
            record = records.new_record(
                scope=scope,
                content=content,
                kind=kind,
                tags=tags,
                importance=importance,
                supersedes=target_id,
                source=source,
                now=now,
            )
            lines.append(record)
            return lines, SaveResult(record, False, superseded)

        result = self._transact(scope, mutate)
        if target is not None and target[0] != scope and result.record.id != target_id:
            superseded = self._expire(target[0], target[1].id)
            result = SaveResult(result.record, result.deduped, superseded)
        return result

    def insert(self, scope: str, new: Sequence[Record]) -> tuple[int, int]:
        """Add whole records to `scope` in one transaction (an import or a restore); ``(added, skipped)``.

        Each record is written exactly as given (`Record.raw`, every field kept); the caller makes
        sure its ``scope`` field is `scope`. Skipped: a record whose id the scope already holds
        (or an earlier record of `new` has), and a live record whose stripped content equals that
        of a live record that was in the scope before this call — the dedupe of `save`. Records
        of `new` are not deduplicated against each other by content, so restoring a backup into
        an empty scope gives back every line. One lock, at most one rewrite; nothing is written
        when nothing is added.
        """
        if not new:
            return 0, 0

        def mutate(snap: ScopeSnapshot) -> tuple[list[Line] | None, tuple[int, int]]:
            now = self._clock()
            ids = {r.id for r in snap.records}
            contents = {r.content.strip() for r in snap.records if not r.is_expired(now)}
            lines = list(snap.lines)
            added = 0
            for record in new:
                if record.id in ids or (not record.is_expired(now) and record.content.strip() in contents):
                    continue
                ids.add(record.id)
                lines.append(record)
                added += 1
            return (lines if added else None), (added, len(new) - added)

        return self._transact(scope, mutate)

    def _expire(self, scope: str, record_id: str) -> Record | None:
        """Set ``expiredAt``/``updatedAt`` of a live record to now; None if it is gone or expired."""

        def mutate(snap: ScopeSnapshot) -> tuple[list[Line] | None, Record | None]:
            now = self._clock()
            lines = list(snap.lines)
            for i, line in enumerate(lines):
                if isinstance(line, Record) and line.id == record_id and not line.is_expired(now):
                    changed = lines[i] = line.with_changes(expiredAt=now - 1, updatedAt=now)
                    return lines, changed
            return None, None

        return self._transact(scope, mutate)

    def delete_ids(self, ids: Sequence[str]) -> list[Record]:
        """Remove the records with these full ids, wherever they are; return what was removed.

        One lock and one rewrite per affected scope. Ids found in no scope are ignored.
        """
        wanted = set(ids)
        if not wanted:
            return []
        removed: list[Record] = []
        for scope in self.discover_scopes():
            if any(r.id in wanted for r in self.snapshot(scope).records):
                removed.extend(self._remove(scope, lambda rec, _now: rec.id in wanted))
        return removed

    def delete_matching(self, scope: str, substring: str) -> list[Record]:
        """Remove the live records of `scope` whose content contains `substring` (NFKC, any case).

        One transaction. An empty `substring` removes nothing (it would match everything).
        """
        needle = _fold(substring)
        if not needle:
            return []
        return self._remove(scope, lambda rec, now: not rec.is_expired(now) and needle in _fold(rec.content))

    def _remove(self, scope: str, doomed: Callable[[Record, int], bool]) -> list[Record]:
        def mutate(snap: ScopeSnapshot) -> tuple[list[Line] | None, list[Record]]:
            now = self._clock()
            keep: list[Line] = []
            gone: list[Record] = []
            for line in snap.lines:
                if isinstance(line, Record) and doomed(line, now):
                    gone.append(line)
                else:
                    keep.append(line)
            return (keep if gone else None), gone

        def notify(gone: list[Record]) -> None:
            if self.on_delete is None or not gone:
                return
            try:
                self.on_delete(scope, [r.id for r in gone])
            except Exception:  # the JSONL delete is done; a sidecar problem must not undo it
                logger.warning("删除 %s 中的记忆后,on_delete 回调失败", scope, exc_info=True)

        return self._transact(scope, mutate, notify)

    # -- touches ---------------------------------------------------------------------------

    def touch(self, hits: Mapping[str, Sequence[str]]) -> None:
        """Note search hits (scope → ids); written later, coalesced, one rewrite per scope.

        A background timer flushes after `touch_delay` seconds; `flush`/`close` flush at once.
        After `close`, touches are written immediately.
        """
        now = self._clock()
        with self._touch_lock:
            for scope, ids in hits.items():
                pending = self._pending.setdefault(scope, {})
                for record_id in ids:
                    entry = pending.setdefault(record_id, [0, now])
                    entry[0] += 1
                    entry[1] = max(entry[1], now)
            if not self._pending:
                return
            closed = self._closed
            if not closed:
                self._register_atexit()
                if self._timer is None:
                    self._timer = threading.Timer(self.touch_delay, self._timer_flush)
                    self._timer.daemon = True
                    self._timer.start()
        if closed:
            self.flush()

    def _register_atexit(self) -> None:
        """Flush at interpreter exit even if nobody calls `close` (holds only a weak reference)."""
        if self._atexit is not None:
            return
        ref = weakref.ref(self)

        def close_at_exit() -> None:
            store = ref()
            if store is not None:
                store.close()

        self._atexit = close_at_exit
        atexit.register(close_at_exit)

    def _timer_flush(self) -> None:
        with self._touch_lock:
            self._timer = None
        self.flush()

    def flush(self) -> None:
        """Write pending touches now: per scope one lock and one rewrite.

        ``accessCount`` grows by the number of hits and ``lastAccessedAt`` becomes the latest
        hit (or stays, if another writer recorded a later one). Ids no longer present are
        ignored. A scope that cannot be written now (lock timeout, disk error) keeps its touches
        pending for the next flush; touches are statistics, so the failure is only logged.
        """
        with self._flush_lock:
            with self._touch_lock:
                pending, self._pending = self._pending, {}
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
            for scope, hits in pending.items():
                try:
                    self._transact(scope, functools.partial(self._apply_touches, hits=hits))
                except (DshMemoryError, OSError) as exc:
                    logger.warning("更新 %s 的访问计数失败,稍后重试:%s", scope, exc)
                    with self._touch_lock:
                        again = self._pending.setdefault(scope, {})
                        for record_id, (count, latest) in hits.items():
                            entry = again.setdefault(record_id, [0, latest])
                            entry[0] += count
                            entry[1] = max(entry[1], latest)

    @staticmethod
    def _apply_touches(snap: ScopeSnapshot, *, hits: Mapping[str, list[int]]) -> tuple[list[Line] | None, None]:
        lines = list(snap.lines)
        changed = False
        for i, line in enumerate(lines):
            if isinstance(line, Record) and line.id in hits:
                count, latest = hits[line.id]
                lines[i] = line.with_changes(
                    accessCount=line.access_count + count,
                    lastAccessedAt=max(line.last_accessed_at, latest),
                )
                changed = True
        return (lines if changed else None), None

    def close(self) -> None:
        """Flush pending touches and stop the timer. Idempotent; the store stays usable."""
        with self._touch_lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            callback, self._atexit = self._atexit, None
        if callback is not None:
            atexit.unregister(callback)
        self.flush()

    # -- aliases ---------------------------------------------------------------------------

    def _aliases_path(self) -> str:
        return os.path.join(self.root, ALIASES_FILE)

    def _read_aliases_raw(self) -> dict[str, Any]:
        """The parsed ``scopes.json``; {} when missing. Raises ValueError/OSError when unusable."""
        path = self._aliases_path()
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        if not isinstance(data, dict):
            raise ValueError("顶层不是 JSON 对象")
        return data

    def read_aliases(self) -> dict[str, str]:
        """Alias name → project scope key, from ``scopes.json``; {} when missing or unreadable."""
        try:
            data = self._read_aliases_raw()
        except (OSError, ValueError) as exc:
            logger.warning("无法读取作用域别名文件 %s,暂按没有别名处理:%s", self._aliases_path(), exc)
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}

    def register_alias(self, name: str, project_key: str) -> None:
        """Record ``name → project_key`` in ``scopes.json``, under the ``scopes.json`` lock.

        The file is re-read inside the lock. The same mapping again is a no-op (nothing written).
        `name` is used as given: the tools layer normalises and validates it.

        :raises ScopeError: ``SCOPE_NAME_TAKEN`` when `name` already names another path.
        :raises StoreError: the file cannot be read, parsed (we refuse to overwrite what we cannot
            understand) or written.
        """
        path = self._aliases_path()
        with self._locks.hold(ALIASES_FILE):
            try:
                data = self._read_aliases_raw()
            except (OSError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise StoreError(
                    f"作用域别名文件 {path} 无法读取或解析({reason}),为免覆盖其中内容,未登记别名 {name!r}。"
                    "请修复或删除该文件后重试。",
                    path=path,
                ) from exc
            if name in data:
                existing = data[name]
                if existing == project_key:
                    return
                raise ScopeError(
                    f"作用域别名 {name!r} 已指向 {_display_key(existing)},不能再指向 {_display_key(project_key)}。"
                    f"请换一个别名,或在 {path} 中修改原有映射。",
                    code="SCOPE_NAME_TAKEN",
                )
            data[name] = project_key
            try:
                text = json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
                payload = text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: escape everything rather than fail
                payload = (json.dumps(data, ensure_ascii=True, indent=2, sort_keys=True) + "\n").encode("ascii")
            _atomic_write(path, payload)
