"""The access-count buffer: search hits are counted in memory and written later, coalesced.

A hit raises ``accessCount`` and ``lastAccessedAt`` of a record, which means rewriting its scope
file. Doing that per search would rewrite the world on every query, so hits wait here and a
background timer writes them, one rewrite per scope, `delay` seconds after the first pending hit,
and never rewrites one scope more than once per `interval` seconds (a busy `serve` searching a
100k-record scope would otherwise rewrite ~30 MB every `delay`); `flush`/`close` (and interpreter
exit) write everything at once.
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence

from dsh_memory_mcp.errors import DshMemoryError

__all__ = ["Hits", "TouchBuffer"]

logger = logging.getLogger("dsh_memory_mcp.store.touches")

#: id → [hits, latest hit ms], for one scope.
Hits = dict[str, list[int]]


def _merge(into: Hits, hits: Mapping[str, list[int]]) -> None:
    for record_id, (count, latest) in hits.items():
        entry = into.setdefault(record_id, [0, latest])
        entry[0] += count
        entry[1] = max(entry[1], latest)


class TouchBuffer:
    """Pending hits per scope, written by `apply(scope, hits)` (one rewrite per scope).

    :param apply: writes one scope's hits; a `DshMemoryError`/`OSError` keeps them pending.
    :param clock: milliseconds since the epoch.
    :param delay: seconds hits are coalesced before a background flush.
    :param interval: the background flush writes a scope at most once per this many seconds.
    """

    def __init__(
        self,
        apply: Callable[[str, Mapping[str, list[int]]], None],
        *,
        clock: Callable[[], int],
        delay: float,
        interval: float = 0.0,
    ) -> None:
        self._apply = apply
        self._clock = clock
        self.delay = delay
        self.interval = interval
        self._written: dict[str, float] = {}  # scope → monotonic time of its last flush
        self._pending: dict[str, Hits] = {}  # scope → id → [hits, latest hit ms]
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._closed = False
        self._atexit: Callable[[], None] | None = None

    def touch(self, hits: Mapping[str, Sequence[str]]) -> None:
        """Note search hits (scope → ids). After `close`, they are written immediately."""
        now = self._clock()
        with self._lock:
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
                self._arm(self.delay)
        if closed:
            self.flush()

    def _register_atexit(self) -> None:
        """Flush at interpreter exit even if nobody calls `close` (holds only a weak reference)."""
        if self._atexit is not None:
            return
        ref = weakref.ref(self)

        def close_at_exit() -> None:
            buffer = ref()
            if buffer is not None:
                buffer.close()

        self._atexit = close_at_exit
        atexit.register(close_at_exit)

    def _arm(self, seconds: float) -> None:
        """Start the timer unless one runs already; holds `_lock`."""
        if self._timer is None and not self._closed:
            self._timer = threading.Timer(max(0.0, seconds), self._timer_flush)
            self._timer.daemon = True
            self._timer.start()

    def _timer_flush(self) -> None:
        with self._lock:
            self._timer = None
        self._flush(force=False)

    def flush(self) -> None:
        """Write every pending hit now, per scope one `apply`; failures stay pending (logged only)."""
        self._flush(force=True)

    def _flush(self, *, force: bool) -> None:
        with self._flush_lock:
            now = time.monotonic()
            with self._lock:
                if force:
                    pending, self._pending = self._pending, {}
                else:
                    due = {s for s in self._pending if now - self._written.get(s, -math.inf) >= self.interval}
                    pending = {s: h for s, h in self._pending.items() if s in due}
                    self._pending = {s: h for s, h in self._pending.items() if s not in due}
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
            for scope, hits in pending.items():
                try:
                    self._apply(scope, hits)
                except (DshMemoryError, OSError) as exc:
                    logger.warning("更新 %s 的访问计数失败,稍后重试:%s", scope, exc)
                    with self._lock:
                        _merge(self._pending.setdefault(scope, {}), hits)
                else:
                    with self._lock:
                        self._written[scope] = time.monotonic()
            with self._lock:
                if self._pending:  # not due yet, or failed: try again when the first one is due
                    now = time.monotonic()
                    waits = [self._written.get(s, -math.inf) + self.interval - now for s in self._pending]
                    self._arm(max(self.delay, min(waits)))

    def close(self) -> None:
        """Flush pending hits and stop the timer. Idempotent; the buffer stays usable."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            callback, self._atexit = self._atexit, None
        if callback is not None:
            atexit.unregister(callback)
        self.flush()
