"""The vector channel's search cache: one float32 matrix per scope, kept in step with its sidecar.

A matrix is cached against the sidecar's inode and the byte offset read so far: an append is read
as a tail, only a rewrite (new inode) is read whole. Least recently used scopes are evicted past
a count and a byte bound, and read again from their sidecar when next needed.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dsh_memory_mcp.store.records import Record, now_ms

if TYPE_CHECKING:  # numpy loads only when vectors are on
    import numpy as np
    import numpy.typing as npt

    from dsh_memory_mcp.search.sidecar import Header
    from dsh_memory_mcp.store.shared import ScopeSnapshot

#: The matrices of at most this many scopes stay in memory…
MAX_CACHED_SCOPES = 64
#: …and at most this many bytes of them (≈170k rows of 384 float32s); the scope in use always stays.
MAX_CACHED_BYTES = 256 * 1024 * 1024
#: A search does not wait longer than this for a scope's matrix that another thread is loading.
SCOPE_LOCK_WAIT = 0.05
_CACHE_KEY = "vectors"
_serial = itertools.count(1)


class ScopeVectors:
    """One scope's sidecar as a matrix, kept in step with the file by reading only what was appended.

    `rows` maps id → row; a duplicate id (two writers embedded the same record) overwrites its
    row, so every row is one distinct id. Guarded by `lock`; readers take the first `n` rows, `ids`
    and `version` under it and compute outside (later rows are appended, those stay valid).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.serial = next(_serial)  # not id(): an evicted object's id may be reused
        #: Bumped on every change, so per-snapshot masks know when to recompute.
        self.version = 0
        self._cjk_lock = threading.Lock()
        #: How many texts `cjk_rows` looked at since start (stats and tests: O(change) per version).
        self.cjk_computed = 0
        self.reset()

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes)

    def reset(self) -> None:
        import numpy as np

        self.identity: tuple[int, int] | None = None
        self.end = 0
        self.header: Header | None = None
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.matrix: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)
        self.n = 0
        self.version += 1
        self._forget_cjk()

    def _forget_cjk(self) -> None:
        with self._cjk_lock:
            #: Per row: the record whose text `_cjk` was computed from, and the result (`cjk_rows`).
            self._cjk_of: list[Record | None] = []
            self._cjk = bytearray()

    def cjk_rows(self, rows: Sequence[int], records: Sequence[Record]) -> list[bool]:
        """Whether each record (the live record of each row) is mostly CJK, computed only for
        records this row has not had before: a new version of the scope costs what changed."""
        from dsh_memory_mcp.search.calibration import is_cjk

        with self._cjk_lock:
            of, flags = self._cjk_of, self._cjk
            if rows and len(of) <= max(rows):
                grow = max(rows) + 1 - len(of)
                of.extend([None] * grow)
                flags.extend(bytes(grow))
            out = []
            for row, record in zip(rows, records, strict=True):
                if of[row] is not record:  # records are immutable: the same object, the same text
                    of[row] = record
                    flags[row] = is_cjk(record.content)
                    self.cjk_computed += 1
                out.append(bool(flags[row]))
            return out

    def refresh(self) -> None:
        """Bring the matrix up to date with the file: nothing, its tail, or (new inode) all of it."""
        from dsh_memory_mcp.search import sidecar

        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self.identity is not None:
                self.reset()
            return
        identity = (st.st_dev, st.st_ino)
        if identity == self.identity and st.st_size == self.end:
            return
        if identity == self.identity and st.st_size > self.end and self.header is not None:
            tail = sidecar.read(self.path, start=self.end, header=self.header)
            if tail is not None and tail.identity == identity:
                self._extend(tail.ids, tail.vectors)
                self.end = tail.end
                return
        full = sidecar.read(self.path)
        self.reset()
        if full is None:
            return
        self.identity = full.identity
        self.end = full.end
        self.header = full.header
        if full.header is not None:
            self._extend(full.ids, full.vectors)

    def held(self, header: Header | None) -> dict[str, int]:
        """Refresh, then id → row if the sidecar carries `header` (else nothing); hold `lock`."""
        self.refresh()
        return self.rows if self.header == header else {}

    def _extend(self, ids: list[str], vectors: npt.NDArray[np.float32]) -> None:
        import numpy as np

        from dsh_memory_mcp.search import sidecar

        if not ids or self.header is None:
            return
        dims = self.header[1]
        # DSH's vectors should already be unit length; normalising again makes cosine a plain dot.
        vectors = sidecar.l2_normalise(vectors)
        need = self.n + len(ids)
        if self.matrix.shape[1] != dims or need > self.matrix.shape[0]:
            grown = np.zeros((max(need, 2 * self.matrix.shape[0], 64), dims), dtype=np.float32)
            if self.matrix.shape[1] == dims:
                grown[: self.n] = self.matrix[: self.n]
            self.matrix = grown
        for rid, vec in zip(ids, vectors, strict=True):
            row = self.rows.get(rid)
            if row is None:
                row = self.n
                self.rows[rid] = row
                self.ids.append(rid)
                self.n += 1
            self.matrix[row] = vec
        self.version += 1

    def drop(self, ids: set[str]) -> None:
        import numpy as np

        keep = [i for i, rid in enumerate(self.ids) if rid not in ids]
        self.matrix = np.ascontiguousarray(self.matrix[keep]) if keep else self.matrix[:0]
        self.ids = [self.ids[i] for i in keep]
        self.rows = {rid: i for i, rid in enumerate(self.ids)}
        self.n = len(self.ids)
        self.version += 1
        self._forget_cjk()  # rows moved


class MatrixCache:
    """`ScopeVectors` by scope, least recently used evicted past `max_scopes` or `max_bytes`.

    :param vec_path: the sidecar path of a scope.
    """

    def __init__(self, vec_path: Callable[[str], str]) -> None:
        self.vec_path = vec_path
        self.max_scopes = MAX_CACHED_SCOPES
        self.max_bytes = MAX_CACHED_BYTES
        self._lock = threading.Lock()
        self._scopes: OrderedDict[str, ScopeVectors] = OrderedDict()
        #: Scopes dropped to stay within the bounds, since start (for stats and tests).
        self.evictions = 0

    def get(self, scope: str) -> ScopeVectors:
        with self._lock:
            sv = self._scopes.get(scope)
            if sv is None:
                sv = self._scopes[scope] = ScopeVectors(self.vec_path(scope))
            self._scopes.move_to_end(scope)
            self._evict(keep=scope)
            return sv

    def peek(self, scope: str) -> ScopeVectors | None:
        """The cached entry without loading or touching it (tests, stats)."""
        with self._lock:
            return self._scopes.get(scope)

    def _evict(self, keep: str) -> None:
        total = sum(sv.nbytes for sv in self._scopes.values())
        while len(self._scopes) > 1 and (len(self._scopes) > self.max_scopes or total > self.max_bytes):
            oldest = next(iter(self._scopes))
            if oldest == keep:
                break
            total -= self._scopes.pop(oldest).nbytes
            self.evictions += 1

    def trim(self) -> None:
        """Apply the byte bound after matrices grew (a search or a write just loaded one)."""
        with self._lock:
            if self._scopes:
                self._evict(keep=next(reversed(self._scopes)))

    def rows(self) -> dict[str, int]:
        with self._lock:
            return {scope: sv.n for scope, sv in self._scopes.items()}

    def cosines(
        self,
        q: npt.NDArray[np.float32],
        snapshots: Sequence[ScopeSnapshot],
        header: Header | None,
        on_missing: Callable[[str], None],
    ) -> list[tuple[npt.NDArray[np.float32], list[str], npt.NDArray[np.bool_]]]:
        """Per scope: the cosines of `q` to its live records that have a vector, their ids, and
        which of them are mostly CJK text (the relevance gate's background depends on the script).

        A scope whose matrix another thread is loading right now is skipped (it will be there
        next time); `on_missing(scope)` is called when some live record has no vector.
        """
        out: list[tuple[npt.NDArray[np.float32], list[str], npt.NDArray[np.bool_]]] = []
        for snap in snapshots:
            sv = self.get(snap.scope)
            if not sv.lock.acquire(timeout=SCOPE_LOCK_WAIT):
                continue
            try:
                sv.refresh()
                matrix, ids, version = sv.matrix[: sv.n], sv.ids, sv.version
                valid = sv.header == header
            finally:
                sv.lock.release()
            view = _live_rows(snap, sv, version, ids, len(matrix), valid, header, on_missing)
            if view is None or not len(matrix):
                continue
            live, cjk = view
            scores = matrix @ q
            out.append((scores[live], [ids[i] for i in live], cjk))
        self.trim()
        return out


def _live_rows(
    snap: ScopeSnapshot,
    sv: ScopeVectors,
    version: int,
    ids: list[str],
    n: int,
    valid: bool,
    header: Header | None,
    on_missing: Callable[[str], None],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]] | None:
    """Which matrix rows are live records of this snapshot, and which of those are CJK; cached on the snapshot.

    Computing it also tells whether some live record has no vector (or the sidecar is another
    model's): then `on_missing` queues the scope for backfill, once per snapshot/sidecar pair.
    """
    import numpy as np

    key = (sv.serial, version, n, valid, header)
    cached = snap.cache.get(_CACHE_KEY)
    if cached is not None and cached[0] == key:
        view: tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]] | None = cached[1]
        return view
    now = now_ms()
    live = {r.id: r for r in snap.records if not r.is_expired(now)}
    if valid:
        found = [i for i, rid in enumerate(ids[:n]) if rid in live]
        rows = np.array(found, dtype=np.intp)
        cjk = np.array(sv.cjk_rows(found, [live[ids[i]] for i in found]), dtype=bool)
        view = (rows, cjk)
        missing = any(rid not in sv.rows for rid in live)
    else:
        view = None
        missing = bool(live)
    snap.cache[_CACHE_KEY] = (key, view)
    if missing:
        on_missing(snap.scope)
    return view
