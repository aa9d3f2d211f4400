"""`SharedStore`: the per-scope JSONL files that many processes and the DSH plugin share.

The facade over `layout`, `snapshots`, `touches`, `aliases` and `writing`; what stays here is the
transaction (`_transact`, `_commit`) under the rules of docs/design.md, Concurrency.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dsh_memory_mcp.errors import StoreError
from dsh_memory_mcp.store import fileio, records, scopes, snapshots, writing
from dsh_memory_mcp.store.aliases import AliasFile
from dsh_memory_mcp.store.clock import SYSTEM, Clock
from dsh_memory_mcp.store.foreground import Foreground
from dsh_memory_mcp.store.journal import Doubt, Entry, Journal
from dsh_memory_mcp.store.layout import StoreLayout
from dsh_memory_mcp.store.locks import LockManager
from dsh_memory_mcp.store.records import CorruptLine, Line, Record
from dsh_memory_mcp.store.redact import Once
from dsh_memory_mcp.store.snapshots import ScopeSnapshot as ScopeSnapshot
from dsh_memory_mcp.store.snapshots import SnapshotCache
from dsh_memory_mcp.store.touches import TouchBuffer
from dsh_memory_mcp.store.trash import Trash
from dsh_memory_mcp.texts import msg

logger = logging.getLogger("dsh_memory_mcp.store.shared")

T = TypeVar("T")


@dataclass(frozen=True)
class Append:
    """A transaction's change that only adds whole records at the end of the file."""

    records: tuple[Record, ...]


#: What a transaction's `mutate` returns to write: every line (a rewrite), or an `Append`.
Change = list[Line] | Append
#: Given the records a removal takes out, before they leave the file (a person's forget: the trash).
Keep = Callable[[list[Record]], None]


@dataclass(frozen=True)
class SaveResult:
    """What `SharedStore.save` did: the record now on disk, and the one it superseded if any."""

    record: Record
    deduped: bool
    superseded: Record | None


@dataclass(frozen=True)
class _Checked:
    """The version of a scope last checked for losses, and what the check found."""

    identity: snapshots.Identity | None
    lineage: int
    #: The journal position the check went up to (`Journal.saved_since`).
    mark: tuple[int, int]
    #: Ids it found missing (looked at again by the next check, since `recover` may restore them).
    missing: frozenset[str]


@dataclass
class _Change:
    """What a transaction did, for the journal: records added, ids removed, ids expired."""

    saved: list[Record] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)


RECOVER_HINT = msg("运行 `dsh-memory-mcp recover`(可先加 --dry-run 查看)按原样恢复它们")


def _holds(snap: ScopeSnapshot, data: bytes) -> bool:
    """Whether `data` (a scope file's bytes) has exactly the lines of `snap`, blank ones aside."""
    raws = data.split(b"\n")
    if raws and not raws[-1]:
        raws.pop()  # the last newline
    if len(raws) != len(snap.lines):
        raws = [raw for raw in raws if raw.strip()]
    return raws == [records.line_bytes(line) for line in snap.lines]


def fold(text: str) -> str:
    """NFKC and lower case: how `delete_matching` (and `memory_forget`'s preview of it) compares
    (full-width ＡＢＣ matches abc)."""
    return unicodedata.normalize("NFKC", text).lower()


class SharedStore:
    """The store directory: per-scope JSONL files, cached snapshots, atomic rewrites, aliases.

    Constructing one creates nothing on disk; `prepare` does. Thread-safe. A method never holds
    two scope locks at once (two processes taking them in opposite orders would deadlock).

    :param lock_timeout: the total wait for a scope lock (→ ``LOCK_TIMEOUT``).
    :param clock: milliseconds since the epoch (record timestamps).
    :param timing: what lock waits, lock staleness and the touch timer are measured on.
    :param touch_delay: / touch_interval: see `TouchBuffer`.
    :param direct_limit: records per scope above which this (direct stdio) process says once that
        `serve` would be fast (`config.DIRECT_LIMIT`); None: never.
    :param on_delete: ``(scope, removed_ids)``, inside the scope lock right after the file was
        replaced; it must not take that lock again; its exceptions are logged, not raised.
    """

    def __init__(
        self,
        root: str,
        *,
        lock_timeout: float = 10.0,
        clock: Callable[[], int] = records.now_ms,
        touch_delay: float = 2.0,
        touch_interval: float = 30.0,
        on_delete: Callable[[str, list[str]], None] | None = None,
        timing: Clock = SYSTEM,
        direct_limit: int | None = None,
    ) -> None:
        self.layout = StoreLayout.at(root)
        self.root = self.layout.root
        self.on_delete = on_delete
        self._clock = clock
        self._locks = LockManager(self.layout.locks_dir, timeout=lock_timeout, clock=timing)
        self._snapshots = SnapshotCache(self.layout)
        self._touches = TouchBuffer(
            self._apply_touches, clock=clock, delay=touch_delay, interval=touch_interval, timing=timing
        )
        self._aliases = AliasFile(self.layout, self._locks.hold)
        self.trash = Trash(self.layout, self._locks.hold, clock)
        self.journal = Journal(self.root)
        self._checked: dict[str, _Checked] = {}  # scope → the version last checked for losses
        self._reported_missing = Once()
        self._checking: set[str] = set()  # scopes a thread is checking for losses right now
        self.direct_limit = direct_limit
        self._said_direct = False
        #: How the loss checks ran (`counters`).
        self.stats: Counter[str] = Counter()
        self._state_lock = threading.Lock()

    # -- layout ----------------------------------------------------------------------------

    def scope_path(self, scope: str) -> str:
        """Absolute path of the scope's JSONL file (it may not exist)."""
        return self.layout.scope_path(scope)

    def prepare(self) -> None:
        """Create the store's directories (`StoreLayout.prepare`: its errors), remove dead writers'
        tmps and tidy the journal in the background."""
        self.layout.prepare()
        for directory in (self.root, self.layout.projects_dir):
            self._sweep(directory)

        def tidy() -> None:  # in a daemon thread: reading a full journal takes seconds
            try:
                self.journal.prune()
            except OSError as exc:  # a journal we cannot tidy must not stop the server
                logger.warning("整理写入日志 %s 失败:%s", self.journal.dir, exc)
            except Exception:
                logger.warning("整理写入日志 %s 失败", self.journal.dir, exc_info=True)
            try:
                self._scrub_journal()
            except Exception:
                logger.warning("抹去写入日志中已删除记忆的内容失败", exc_info=True)

        threading.Thread(target=tidy, name="dsh-journal-tidy", daemon=True).start()

    def _sweep(self, directory: str) -> None:
        """Remove leftover tmps of dead writers in `directory` (a listdir: cheap next to an fsync)."""
        removed = 0
        for path in fileio.leftover_tmps(directory):
            with contextlib.suppress(OSError):
                os.unlink(path)
                removed += 1
        if removed:
            logger.warning("已清除 %d 个已退出的写入者遗留的临时文件(%s)", removed, directory)

    def leftover_tmps(self) -> list[str]:
        """Tmp files of dead writers still in the store (read-only; `prepare` and writes remove them)."""
        return fileio.leftover_tmps(self.root) + fileio.leftover_tmps(self.layout.projects_dir)

    # -- reading ---------------------------------------------------------------------------

    def snapshot(self, scope: str, *, yield_to: Foreground | None = None) -> ScopeSnapshot:
        """The scope's current content, lock-free; the same object while the file is unchanged (a
        missing file: empty). Acknowledged records it lacks are reported once (`missing`).
        `yield_to`: see `SnapshotCache.load`.

        :raises StoreError: the file exists but cannot be read.
        """
        path = self.scope_path(scope)
        snap = self._snapshots.load(path, scope, yield_to=yield_to)
        if self.direct_limit is not None and len(snap.records) > self.direct_limit:
            self._say_direct(scope, len(snap.records))
        checked = self._checked.get(scope)
        if checked is None or checked.identity != snap.identity:
            # One check per scope at a time: a version skipped is covered by the next check.
            with self._state_lock:
                if scope in self._checking:
                    self.stats["loss_checks_skipped"] += 1
                    return snap
                self._checking.add(scope)
            try:
                checked = self._checked.get(scope)
                if checked is None or checked.identity != snap.identity:
                    self._check_losses(scope, snap, checked)
            finally:
                with self._state_lock:
                    self._checking.discard(scope)
        return snap

    def _say_direct(self, scope: str, count: int) -> None:
        """Once per store (one per process): this scope is past the direct limit, `serve` would be fast."""
        with self._state_lock:
            if self._said_direct:
                return
            self._said_direct = True
        logger.warning(
            "作用域 %s 有 %d 条记忆,超过直连进程适合的 %d 条:本进程照常工作,但每个宿主进程都要自己读一遍记忆库,"
            "较慢。运行 `dsh-memory-mcp setup --serve`(登录时自动启动)或 `dsh-memory-mcp serve`,"
            "宿主会中继到这一个常驻进程,快得多",
            scope,
            count,
            self.direct_limit,
        )

    def counters(self) -> dict[str, int]:
        """How much work this store did so far, for tests and the benchmark: snapshot ``parses``,
        ``extends``, ``hits``, ``evictions``; ``loss_checks_full`` / ``_incremental`` / ``_skipped``;
        ``journal_segment_reads``; this process's ``id_index_builds`` / ``content_index_builds``."""
        out = {name: int(value) for name, value in self._snapshots.stats.items()}
        checks = ("loss_checks_full", "loss_checks_incremental", "loss_checks_skipped")
        out.update({name: int(self.stats[name]) for name in checks})
        out["journal_segment_reads"] = int(self.journal.stats["segment_reads"])
        out.update({name: int(snapshots.COUNTERS[name]) for name in ("id_index_builds", "content_index_builds")})
        return out

    # -- losses to unlocked writers --------------------------------------------------------

    def _check_losses(self, scope: str, snap: ScopeSnapshot, checked: _Checked | None) -> None:
        """Find (and report once) acknowledged records `snap` lacks, at the cost of what changed:
        in the lineage checked last, only the saves journalled since and the ids already missing
        (that lineage lost nothing but journalled removals); else every live journal entry."""
        try:
            self.journal.refresh()
            since = None
            if checked is not None and checked.lineage == snap.lineage:
                since = self.journal.saved_since(scope, checked.mark)
            if since is not None and checked is not None:
                self.stats["loss_checks_incremental"] += 1
                entries, mark = since
                again = [e for rid in checked.missing if (e := self.journal.live_entry(scope, rid)) is not None]
                candidates = [*again, *entries]
            else:
                self.stats["loss_checks_full"] += 1
                candidates, mark = self.journal.live_entries(scope)
            lost = self._confirmed_missing(scope, snap, candidates)
        except OSError:
            return
        self._checked[scope] = _Checked(snap.identity, snap.lineage, mark, frozenset(e.id for e in lost))
        lost = self._restorable(snap, lost)
        if lost:
            self._report_missing(scope, snap, lost)

    def _restorable(self, snap: ScopeSnapshot, lost: list[Entry]) -> list[Entry]:
        """Of the erased entries `lost`, those `recover` puts back: not a live copy of a text that
        a live record of `snap`, or a later entry of `lost`, holds (the text was saved again after
        its first copy was erased: restoring both would make two live copies)."""
        if not lost:
            return lost
        now = self._clock()
        texts: set[str] = set()
        dropped: set[str] = set()
        for entry in sorted(lost, key=lambda e: -e.seq):
            line = records.parse_line(entry.line)
            if not isinstance(line, Record) or line.is_expired(now):
                continue
            text = line.content.strip()
            if text in texts or snapshots.find_live_content(snap, text, now) is not None:
                dropped.add(entry.id)
            texts.add(text)
        return [e for e in lost if e.id not in dropped]

    def _confirmed_missing(self, scope: str, snap: ScopeSnapshot, candidates: Sequence[Entry]) -> list[Entry]:
        """The `candidates` (live journal entries of `scope`) that `snap` lacks — for sure: each is
        confirmed by reading the file again, then the journal again (a save is journalled after its
        commit, a removal before it, so a racing write is never taken for a loss).

        :raises OSError: the file or the journal cannot be read.
        """
        if len(candidates) > snapshots.RECENT:
            left = snapshots.absent(snap, candidates)
        else:
            left = snapshots.absent(snap, candidates, recent_only=True)
        if not left:
            return []
        again = self._snapshots.load(self.scope_path(scope), scope)
        left = snapshots.absent(again, left)
        if not left:
            return []
        self.journal.refresh()
        return self.journal.undoubted(scope, left)  # still live, and no unparseable line may be their removal

    def _refreshed(self) -> bool:
        """Read what was journalled since (`Journal.refresh`); False when the journal cannot be read."""
        try:
            self.journal.refresh()
        except OSError:
            return False
        return True

    def _report_missing(self, scope: str, snap: ScopeSnapshot, lost: list[Entry]) -> None:
        if not self._reported_missing.first((scope, frozenset(e.id for e in lost))):
            return
        logger.warning(
            "作用域 %s 的文件 %s 中少了 %d 条本服务确认保存过、从未删除或取代的记忆(多半是不加锁的写入者"
            "用旧快照整体覆盖了文件)。%s。",
            scope,
            snap.path,
            len(lost),
            RECOVER_HINT,
        )

    def missing(self, scope: str | None = None) -> dict[str, list[Entry]]:
        """Acknowledged, never removed records now absent from their scope file, by scope (read-only)."""
        if not self._refreshed():
            return {}
        wanted = [scope] if scope is not None else self.journal.scopes()
        found: dict[str, list[Entry]] = {}
        for name in wanted:
            try:
                candidates, _mark = self.journal.live_entries(name)
                snap = self._snapshots.load(self.scope_path(name), name)
                lost = self._restorable(snap, self._confirmed_missing(name, snap, candidates))
            except OSError:
                continue
            if lost:
                found[name] = lost
        return found

    def doubtful(self, scope: str | None = None) -> dict[str, list[Doubt]]:
        """Records absent from their scope file that `recover` will not restore because a journal
        line that does not parse mentions them after their save (it may have been their removal),
        by scope, each with the line that raised the doubt (read-only)."""
        if not self._refreshed():
            return {}
        found: dict[str, list[Doubt]] = {}
        for name in [scope] if scope is not None else self.journal.scopes():
            snap = self._snapshots.load(self.scope_path(name), name)
            doubts = self.journal.doubtful(name, (r.id for r in snap.records))
            if doubts:
                found[name] = doubts
        return found

    def recover(self, scope: str | None = None, *, dry_run: bool = False) -> dict[str, list[Entry]]:
        """Put back, under each scope's lock, the records `missing` finds (their exact lines,
        appended) unless their id is on disk again or their text is live (`_restorable`); what
        was (with `dry_run`: would be) restored, by scope.
        """
        restored: dict[str, list[Entry]] = {}
        for name, candidates in self.missing(scope).items():
            if dry_run:
                restored[name] = candidates
                continue

            def mutate(snap: ScopeSnapshot, wanted: list[Entry] = candidates) -> tuple[Change | None, list[Entry]]:
                present = snapshots.id_index(snap)
                back = self._restorable(snap, [e for e in wanted if not present.has(e.id)])
                lines = [records.parse_line(entry.line) for entry in back]
                if all(isinstance(line, Record) for line in lines):
                    return (Append(tuple(line for line in lines if isinstance(line, Record))) if back else None), back
                return [*snap.lines, *lines], back

            done = self._transact(name, mutate)
            if done:
                restored[name] = done
                logger.warning("已在作用域 %s 恢复 %d 条被覆盖的记忆", name, len(done))
        return restored

    def discover_scopes(self) -> list[str]:
        """Every scope present on disk: ``global`` (if its file exists), then the others sorted.

        A ``projects/*.jsonl`` file only counts if one of its records names a scope whose sha1
        is the file name; empty files and files of unknown origin are skipped.
        """
        found: list[str] = []
        others: set[str] = set()
        for rel in self.layout.scope_files(sha1_only=True):
            if rel == scopes.scope_file_relpath(scopes.GLOBAL):
                found.append(scopes.GLOBAL)
                continue
            try:
                name = self._snapshots.scope_name(self.layout.abspath(rel))
            except StoreError as exc:
                logger.warning("跳过无法读取的记忆文件:%s", exc)
                continue
            if name and name != scopes.GLOBAL:
                others.add(name)
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
            snap = self.snapshot(scope)
            index = snapshots.id_index(snap)
            for key, prefix in wanted.items():
                result[key].extend((scope, snap.records[pos]) for pos in index.matching(prefix))
        return result

    # -- transactions ----------------------------------------------------------------------

    def lock(self, scope: str) -> contextlib.AbstractContextManager[None]:
        """The scope's lock, for other writers of per-scope files (the vector sidecar)."""
        return self._locks.hold(scope)

    def _transact(
        self,
        scope: str,
        mutate: Callable[[ScopeSnapshot], tuple[Change | None, T]],
        after: Callable[[T], None] | None = None,
        journal: Callable[[T], _Change] | None = None,
    ) -> T:
        """One read-modify-write of a scope file under its lock.

        `mutate` gets the content as it is *inside* the lock and returns the change (new lines, an
        `Append`, or None) and a result; `_commit` writes it, or we start over when an unlocked
        writer changed the file meanwhile. `after` runs inside the lock once the change is on disk.
        `journal` says what the result means for the journal: removals are journalled before the
        commit, added records after it, both inside the lock and before any acknowledgement.

        The file is read once before the lock (a cold parse must not make other writers wait);
        inside it the cached version is only checked or extended. The fsyncs of an append and its
        journal line come after the lock (`pending`), before anything is acknowledged.
        """
        path = self.scope_path(scope)
        self._snapshots.load(path, scope)
        self.journal.tidy()  # a prune/compaction the last appends made due runs here, outside the lock
        pending = fileio.Durability()
        try:
            result = self._locked(scope, path, mutate, after, journal, pending)
            try:
                pending.sync()
            except OSError as exc:
                raise StoreError(
                    msg(
                        "已写入 {path},但无法将其落盘:{why}。断电时这次修改可能丢失;请检查磁盘。",
                        path=path,
                        why=exc.strerror or exc,
                    ),
                    path=path,
                ) from exc
            return result
        finally:
            pending.settle()  # after a failure inside the lock: what was written is visible, flush it

    def _locked(
        self,
        scope: str,
        path: str,
        mutate: Callable[[ScopeSnapshot], tuple[Change | None, T]],
        after: Callable[[T], None] | None,
        journal: Callable[[T], _Change] | None,
        pending: fileio.Durability,
    ) -> T:
        """The part of `_transact` inside the scope lock: decide on fresh content, write, journal."""
        with self._locks.hold(scope):
            self._sweep(os.path.dirname(path))
            for attempt in range(1, 2 * snapshots.MAX_REREADS + 1):
                snap = self._snapshots.load(path, scope)
                change, result = mutate(snap)
                note = journal(result) if journal is not None else None
                if change is None and (note is None or not (note.removed or note.superseded)):
                    return result
                if note is not None:
                    self._journal(scope, note, before=True)
                # No change to the file: only records an unlocked writer erased are removed (journalled).
                last_try = attempt >= snapshots.MAX_REREADS
                if change is not None and not self._commit(scope, snap, change, last_try=last_try, pending=pending):
                    continue
                if note is not None:
                    self._journal(scope, note, before=False, pending=pending)
                    if note.removed or note.superseded:
                        self._scrub_journal()
                if after is not None:
                    after(result)
                return result
        raise StoreError(
            msg(
                "写入 {path} 失败:写入期间该文件被反复整份替换(有不加锁的写者在同时改它),"
                "本次保存没有完成。请稍后重试,并避免与 DSH 插件同时写同一个作用域。",
                path=path,
            ),
            path=path,
        )

    def _journal(self, scope: str, change: _Change, *, before: bool, pending: fileio.Durability | None = None) -> None:
        try:
            if before:
                self.journal.removed(scope, change.removed, op="forget")
                self.journal.removed(scope, change.superseded, op="supersede")
            elif change.saved:
                self.journal.saved(scope, [(r.id, r.raw) for r in change.saved], defer=pending)
        except OSError as exc:
            path = self.journal.dir
            if before:
                raise StoreError(
                    msg(
                        "无法写入记忆库的写入日志 {path}:{why}。本次修改没有提交,文件未改动。",
                        path=path,
                        why=exc.strerror or exc,
                    ),
                    path=path,
                ) from exc
            raise StoreError(
                msg(
                    "记忆已写入,但无法写入记忆库的写入日志 {path}:{why}(被其他程序覆盖时将无法发现与恢复)。"
                    "请检查磁盘空间与权限。",
                    path=path,
                    why=exc.strerror or exc,
                ),
                path=path,
            ) from exc

    def _scrub_journal(self) -> None:
        """Take the text of what was just removed out of the journal (`Journal.scrub`); a failure is
        only logged (the removal is committed; the scrub stays pending for the next one or start-up)."""
        try:
            self.journal.refresh()
            self.journal.scrub()
        except OSError as exc:
            logger.warning(
                "已删除的记忆的内容暂时无法从写入日志 %s 中抹去(%s);下次删除或启动时重试",
                self.journal.dir,
                exc.strerror or exc,
            )

    def _commit(
        self,
        scope: str,
        snap: ScopeSnapshot,
        change: Change,
        *,
        last_try: bool,
        pending: fileio.Durability,
    ) -> bool:
        """The one place a transaction's change reaches the disk (scope lock held): an `Append`
        (`_append`) or a whole replacement (`_write_lines`). False when the file is no longer the
        version `snap` was read from: start over (`last_try`: write anyway)."""
        if isinstance(change, Append):
            return self._append(snap, change.records, last_try=last_try, pending=pending)
        if not last_try and snapshots.identity_of(snap.path) != snap.identity:
            return False
        try:
            self._write_lines(scope, snap.path, change, read=snap)
        except fileio.Changed:
            # Replaced or edited in place (maybe keeping size and mtime): read it afresh, start over.
            logger.warning("记忆文件 %s 在本次重写提交前被不加锁的写入者改动:已按它的新内容重做", snap.path)
            self._snapshots.drop(snap.path)
            return False
        return True

    def _append(
        self, snap: ScopeSnapshot, new: Sequence[Record], *, last_try: bool, pending: fileio.Durability
    ) -> bool:
        """Append `new` to the scope file (its fsync left to `pending`) and cache the grown version
        without reading it back."""
        data = records.render_bytes(new)
        # On the last try, write whatever the file is now (the cached version no longer describes it).
        expect = snapshots.identity_of(snap.path) if last_try else snap.identity
        st, matched, torn = writing.append_bytes(snap.path, data, expect=expect, defer=pending)
        if not matched:
            return False
        if torn:
            logger.warning(
                "记忆文件 %s 末行不完整(可能是写入时进程被中止):已另起一行写入,该行原样保留(不会删除)", snap.path
            )
        identity = snapshots.stat_identity(st)
        payload = b"\n" + data if torn else data
        size = snap.identity[2] if snap.identity is not None else 0  # no file yet: we created it
        if expect == snap.identity and identity[2] == size + len(payload):
            grown = snapshots.appended(snap, identity, payload, list(new), payload.count(b"\n"))
            self._snapshots.put(grown, carry=False)
        else:
            self._snapshots.drop(snap.path)  # someone else wrote too: the next read extends or re-reads
        return True

    def _write_lines(self, scope: str, path: str, lines: list[Line], *, read: ScopeSnapshot) -> None:
        """Replace the scope file by `lines`, made from `read` (`fileio.commit` checks the file is
        still that version), and cache the result without reading it back; it keeps `read`'s
        lineage (it lacks only what our tools removed).

        :raises fileio.Changed: the file was replaced or edited meanwhile (nothing written).
        """
        probe = writing.Probe(writing.encoded_chunks(lines), snapshots.PROBE_BYTES)
        ident = read.identity or (0, 0, 0, 0)
        st = writing.replace_file(
            path, probe, read=fileio.Read(ident[0], ident[1], ident[2], functools.partial(_holds, read))
        )
        numbered = [
            CorruptLine(line.raw, n) if isinstance(line, CorruptLine) else line for n, line in enumerate(lines, 1)
        ]
        snap = snapshots.make(
            path,
            scope,
            snapshots.stat_identity(st),
            numbered,
            head=probe.head,
            tail=probe.tail,
            newlines=probe.newlines,
            lineage=read.lineage,
        )
        self._snapshots.put(snap)

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
        merges: Sequence[str] = (),
        restored: Record | None = None,
    ) -> SaveResult:
        """Append a record to `scope`, unless a live record there other than the one superseded has
        the same ``content.strip()`` (then it is returned, ``deduped=True``).

        `supersedes` (a full id or ≥ 8-character prefix naming exactly one live record in any
        scope) gets ``expiredAt = now − 1`` and ``updatedAt = now``, deduped or not: in the same
        transaction when it is in `scope`, else in a second one afterwards (never two locks at
        once). `merges`: more live records of `scope` hidden the same way and named in the new
        record's ``merged``. `restored`: a deleted record brought back from the trash, whose history
        the new record carries as an edit's does. Arguments are validated by the tools layer, not here.
        """
        target: tuple[str, Record] | None = None
        if supersedes:
            live = {
                (s, r.id): (s, r) for s, r in self._find([supersedes])[supersedes] if not r.is_expired(self._clock())
            }
            if not live:  # erased by an unlocked writer: superseding it keeps `recover` from restoring it
                live = {(r.scope, r.id): (r.scope, r) for r in self.find_erased(supersedes)}
            if len(live) == 1:
                target = next(iter(live.values()))
        target_id = target[1].id if target is not None else None
        wanted = content.strip()
        # Build the dedupe index lock-free; inside the lock it is then only extended.
        snapshots.content_index(self.snapshot(scope))

        expired: list[str] = []  # ids to journal as superseded (`_expiry`)

        def mutate(snap: ScopeSnapshot) -> tuple[Change | None, SaveResult]:
            now = self._clock()
            # The record being superseded is no duplicate of its replacement: same content with
            # other tags, kind or importance is an edit (a new record), not a no-op.
            existing = snapshots.find_live_content(snap, wanted, now, exclude={target_id, *merges})
            superseded: Record | None = None
            lines: list[Line] | None = None
            expired.clear()
            # The version replaced, as read now when it lives here: its history goes on (`new_record`).
            prior = target[1] if target is not None else restored
            if target is not None and target[0] == scope:
                lines, superseded, expired[:] = self._expiry(scope, snap, target[1].id, now)
                prior = superseded or prior
            if existing is not None:
                return lines, SaveResult(existing, True, superseded)
            merged: list[str] = []
            if merges:  # only a keep-one save: the scan is O(scope) inside the lock
                for i, line in enumerate(lines if lines is not None else snap.lines):
                    if isinstance(line, Record) and line.id in merges and not line.is_expired(now):
                        lines = lines if lines is not None else list(snap.lines)
                        lines[i] = line.with_changes(expiredAt=now - 1, updatedAt=now)
                        merged.append(line.id)
            expired.extend(merged)
            record = records.new_record(
                scope=scope,
                content=content,
                kind=kind,
                tags=tags,
                importance=importance,
                supersedes=target_id,
                source=source,
                now=now,
                prior=prior,
                merged=merged,
            )
            if lines is None:  # nothing else changes in the file: one line at the end, no rewrite
                return Append((record,)), SaveResult(record, False, superseded)
            lines.append(record)
            return lines, SaveResult(record, False, superseded)

        def change(result: SaveResult) -> _Change:
            return _Change(saved=[] if result.deduped else [result.record], superseded=list(expired))

        result = self._transact(scope, mutate, journal=change)
        if result.deduped:
            # The record we answer with may have been appended by a writer that has not flushed
            # it yet (appends are flushed after the lock): make it durable before we say so.
            writing.sync_file(self.scope_path(scope))
        if target is not None and target[0] != scope and result.record.id != target_id:
            superseded = self._expire(target[0], target[1].id)
            result = SaveResult(result.record, result.deduped, superseded)
        return result

    def insert(self, scope: str, new: Sequence[Record], *, dry_run: bool = False) -> tuple[int, int]:
        """Append whole records to `scope` as given (`Record.raw`; the caller makes their ``scope``
        field `scope`) in one transaction (an import or a restore); ``(added, skipped)``.

        Skipped: an id the scope (or an earlier record of `new`) has, and a live record whose
        stripped content a live record already in the scope has (`new` is not deduplicated against
        itself, so a backup restores every line). `dry_run`: the count only, without lock or write.
        """
        if not new:
            return 0, 0

        added: list[Record] = []

        def mutate(snap: ScopeSnapshot) -> tuple[Change | None, tuple[int, int]]:
            now = self._clock()
            present = snapshots.id_index(snap)
            ids: set[str] = set()  # of `new`, so far
            added.clear()
            for record in new:
                if record.id in ids or present.has(record.id):
                    continue
                if not record.is_expired(now) and snapshots.find_live_content(snap, record.content, now) is not None:
                    continue
                ids.add(record.id)
                added.append(record)
            return (Append(tuple(added)) if added else None), (len(added), len(new) - len(added))

        if dry_run:
            return mutate(self.snapshot(scope))[1]
        return self._transact(scope, mutate, journal=lambda _: _Change(saved=list(added)))

    def _expire(self, scope: str, record_id: str) -> Record | None:
        """Supersede a live record of `scope` in a transaction of its own (`_expiry`); None if it is
        gone or expired."""
        expired: list[str] = []

        def mutate(snap: ScopeSnapshot) -> tuple[Change | None, Record | None]:
            lines, changed, expired[:] = self._expiry(scope, snap, record_id, self._clock())
            return lines, changed

        return self._transact(scope, mutate, journal=lambda _changed: _Change(superseded=list(expired)))

    def _expiry(
        self, scope: str, snap: ScopeSnapshot, record_id: str, now: int
    ) -> tuple[list[Line] | None, Record | None, list[str]]:
        """Supersede `record_id` in `snap` (under the scope lock): the new lines (None when its line
        is not there), the record superseded (None: no live record of that id), and the ids to
        journal as superseded. An erased record (`_erased`) is superseded in the journal only, and
        erased copies of its text with it, so `recover` never puts them back.
        """
        lines: list[Line] | None = None
        hit: Record | None = None
        for i, line in enumerate(snap.lines):
            if isinstance(line, Record) and line.id == record_id and not line.is_expired(now):
                lines = list(snap.lines)
                hit = lines[i] = line.with_changes(expiredAt=now - 1, updatedAt=now)
                break
        erased = self._erased(scope, snap)
        if hit is None:
            hit = next((r for r in erased if r.id == record_id and not r.is_expired(now)), None)
            if hit is None:
                return None, None, []
        text = hit.content.strip()
        return lines, hit, [hit.id, *(r.id for r in erased if r.id != hit.id and r.content.strip() == text)]

    def delete_ids(
        self, ids: Sequence[str], *, erased: list[Record] | None = None, keep: Keep | None = None
    ) -> list[Record]:
        """Remove the records with these full ids, wherever they are (one transaction per scope);
        return what was removed. Erased ones (`_erased`), and erased copies of a removed text, are
        removed in the journal (`recover` never brings them back), returned and added to `erased`.
        `keep` gets what each scope's transaction removes, inside its lock before the file changes.
        """
        wanted = set(ids)
        if not wanted:
            return []
        self._refreshed()
        removed: list[Record] = []
        for scope in dict.fromkeys([*self.discover_scopes(), *self.journal.scopes()]):
            if any(r.id in wanted for r in self.snapshot(scope).records) or any(
                self.journal.live_entry(scope, rid) is not None for rid in wanted
            ):
                removed.extend(self._remove(scope, lambda rec, _now: rec.id in wanted, erased, keep))
        return removed

    def delete_matching(
        self, scope: str, substring: str, *, erased: list[Record] | None = None, keep: Keep | None = None
    ) -> list[Record]:
        """Remove the live records of `scope` whose content contains `substring` (NFKC, any case),
        erased ones included, `keep` called (as `delete_ids`).

        One transaction. An empty `substring` removes nothing (it would match everything).
        """
        needle = fold(substring)
        if not needle:
            return []
        return self._remove(
            scope, lambda rec, now: not rec.is_expired(now) and needle in fold(rec.content), erased, keep
        )

    def _remove(
        self,
        scope: str,
        doomed: Callable[[Record, int], bool],
        erased: list[Record] | None = None,
        keep: Keep | None = None,
    ) -> list[Record]:
        """Remove the records `doomed` picks, and the erased ones (`_erased`) it picks or that hold
        the text of a removed one: their removal is journalled, so `recover` never brings them back.
        The erased ones are also added to `erased`."""
        lost: list[Record] = []

        def mutate(snap: ScopeSnapshot) -> tuple[Change | None, list[Record]]:
            now = self._clock()
            left: list[Line] = []
            gone: list[Record] = []
            for line in snap.lines:
                if isinstance(line, Record) and doomed(line, now):
                    gone.append(line)
                else:
                    left.append(line)
            texts = {r.content.strip() for r in gone}
            lost[:] = [r for r in self._erased(scope, snap) if doomed(r, now) or r.content.strip() in texts]
            if keep is not None and (gone or lost):
                keep(gone + lost)  # before the file changes: a crash leaves them live, never lost
            return (left if gone else None), gone + lost

        def notify(gone: list[Record]) -> None:
            if self.on_delete is None or not gone:
                return
            try:
                self.on_delete(scope, [r.id for r in gone])
            except Exception:  # the JSONL delete is done; a sidecar problem must not undo it
                logger.warning("删除 %s 中的记忆后,on_delete 回调失败", scope, exc_info=True)

        removed = self._transact(scope, mutate, notify, journal=lambda gone: _Change(removed=[r.id for r in gone]))
        if erased is not None:
            erased.extend(lost)
        return removed

    def _erased(self, scope: str, snap: ScopeSnapshot) -> list[Record]:
        """Records of `scope` we acknowledged and never removed that `snap` (read under the scope
        lock) lacks — erased by an unlocked writer — parsed from their journal lines (`_check_losses`)."""
        checked = self._checked.get(scope)
        if checked is None or checked.identity != snap.identity:
            self._check_losses(scope, snap, checked)
            checked = self._checked.get(scope)
            if checked is None or checked.identity != snap.identity:
                return []
        elif checked.missing and not self._refreshed():
            return []
        found: list[Record] = []
        for rid in checked.missing:
            entry = self.journal.live_entry(scope, rid)
            line = records.parse_line(entry.line) if entry is not None else None
            if isinstance(line, Record) and line.id == rid:
                found.append(line)
        return found

    def find_erased(self, key: str) -> list[Record]:
        """Records by full id or id prefix (≥ 8 characters) that an unlocked writer erased from their
        scope file (`_erased`), for a forget or a supersede that names one; [] when none."""
        prefix = key.strip().lower()
        if len(prefix) < 8 or not self._refreshed():
            return []
        found: list[Record] = []
        for scope in self.journal.scopes():
            entries, _mark = self.journal.live_entries(scope)
            if any(e.id.lower().startswith(prefix) for e in entries):
                found.extend(r for r in self._erased(scope, self.snapshot(scope)) if r.id.lower().startswith(prefix))
        return found

    # -- touches ---------------------------------------------------------------------------

    def touch(self, hits: Mapping[str, Sequence[str]]) -> None:
        """Note search hits (scope → ids), written later and coalesced (`TouchBuffer`)."""
        self._touches.touch(hits)

    def flush(self) -> None:
        """Write pending touches now (`TouchBuffer.flush`): ``accessCount`` += hits, ``lastAccessedAt``
        = the latest."""
        self._touches.flush()

    def close(self) -> None:
        """Flush pending touches and stop the timer. Idempotent; the store stays usable."""
        self._touches.close()

    def _apply_touches(self, scope: str, hits: Mapping[str, list[int]]) -> None:
        def mutate(snap: ScopeSnapshot) -> tuple[Change | None, None]:
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

        self._transact(scope, mutate)

    # -- aliases ---------------------------------------------------------------------------

    def read_aliases(self) -> dict[str, str]:
        """Alias name → project scope key, from ``scopes.json``; {} when missing or unreadable."""
        return self._aliases.read()

    def aliases_problem(self) -> str | None:
        """Why ``scopes.json`` is unusable (Chinese, with the fix), or None (read-only)."""
        return self._aliases.problem()

    def register_alias(self, name: str, project_key: str) -> None:
        """Record ``name → project_key`` in ``scopes.json`` (`AliasFile.register`: its errors)."""
        self._aliases.register(name, project_key)
