"""The vector channel's backfill: give every live record of every scope a vector of the current model.

A scope is marked dirty when a search sees a record without a vector, when a sidecar is created or
voided, when the backend becomes ready, and by the idle worker's periodic rescan; the worker then
embeds one small batch of one scope per turn, scopes taking turns (docs/design.md: Embedding backend).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh_memory_mcp.errors import DshMemoryError, EmbeddingUnavailable
from dsh_memory_mcp.store.records import now_ms

if TYPE_CHECKING:
    from dsh_memory_mcp.search.backend import Backend
    from dsh_memory_mcp.search.matrices import MatrixCache
    from dsh_memory_mcp.search.writes import SidecarWriter
    from dsh_memory_mcp.store.shared import SharedStore

#: Records per backfill request: a search embedding is never stuck long behind one; amortises the round trip.
BACKFILL_BATCH = 16
#: Seconds between two progress lines of a running backfill on stderr.
PROGRESS_EVERY = 10.0


class Backfill:
    """Dirty scopes in turn order, and one embedding step at a time.

    :param on_dirty: called after a scope was marked (the worker wakes, idle ends).
    """

    def __init__(
        self,
        backend: Backend,
        cache: MatrixCache,
        store: SharedStore,
        log: logging.Logger,
        on_dirty: Callable[[], None],
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.store = store
        self.log = log
        self.on_dirty = on_dirty
        self.writer: SidecarWriter | None = None
        self._dirty: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()
        #: Records embedded by the backfill since start (status, tests).
        self.backfilled = 0
        #: Records still without a vector, per scope, as last seen (progress for doctor, the page, stderr).
        self.missing: dict[str, int] = {}
        #: Seconds spent embedding backfill batches (throughput = backfilled / this).
        self.seconds = 0.0
        self._reported = 0.0

    @property
    def remaining(self) -> int:
        return sum(self.missing.values())

    def rate(self) -> float | None:
        """Records per second embedded by the backfill so far (None before its first batch)."""
        return self.backfilled / self.seconds if self.seconds > 0 else None

    def _progress(self) -> None:
        """One stderr line every `PROGRESS_EVERY` seconds while a backfill runs, and one when it ends."""
        now = time.monotonic()
        left = self.remaining
        if left and now - self._reported < PROGRESS_EVERY:
            return
        if not left and not self._reported:
            return
        self._reported = now if left else 0.0
        self.log.info("vector: 回填向量:已完成 %s 条,还剩 %s 条(%.1f 条/秒)", self.backfilled, left, self.rate() or 0.0)

    def __len__(self) -> int:
        return len(self._dirty)

    def mark(self, scope: str) -> None:
        with self._lock:
            self._dirty[scope] = None
        self.on_dirty()

    def mark_all(self) -> None:
        try:
            found = self.store.discover_scopes()
        except DshMemoryError as exc:
            self.log.warning("vector: 无法列出记忆作用域:%s", exc)
            return
        for scope in found:
            self.mark(scope)

    def step(self) -> bool:
        """Embed one batch of one scope's records that lack a vector; False when nothing is left."""
        assert self.writer is not None
        with self._lock:
            if not self._dirty:
                return False
            scope, _ = self._dirty.popitem(last=False)
        try:
            snap = self.store.snapshot(scope)
        except DshMemoryError:
            return True
        sv = self.cache.get(scope)
        with sv.lock:
            have = sv.held(self.backend.header())
            now = now_ms()
            missing = [r for r in snap.records if r.content and not r.is_expired(now) and r.id not in have]
        self.missing[scope] = len(missing)
        if not missing:
            del self.missing[scope]
            return True
        batch = missing[:BACKFILL_BATCH]
        t0 = time.monotonic()
        try:
            vectors = self.backend.embed([r.content for r in batch])
        except EmbeddingUnavailable as exc:
            self.mark(scope)
            self.backend.embedding_failed(exc)
            return True
        self.writer.write(scope, [(r.id, v) for r, v in zip(batch, vectors, strict=True)])
        self.seconds += time.monotonic() - t0
        self.backfilled += len(batch)
        self.missing[scope] = len(missing) - len(batch)
        self._progress()
        if len(missing) > len(batch):
            self.mark(scope)  # to the back: scopes take turns
        return True
