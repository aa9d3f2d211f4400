"""The access-count buffer: search hits (``accessCount``, ``lastAccessedAt``) wait here and a
background timer writes them, one rewrite per scope, `delay` seconds after the first pending hit
and at most once per `interval` per scope; `flush`/`close` (and interpreter exit) write at once.
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence

from dsh_memory_mcp.errors import DshMemoryError
from dsh_memory_mcp.store.clock import SYSTEM, Clock

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
    :param clock: milliseconds since the epoch (the hits' ``lastAccessedAt``).
    :param delay: seconds hits are coalesced before a background flush.
    :param interval: the background flush writes a scope at most once per this many seconds.
    :param timing: what `delay` and `interval` are measured and the timer waits on.
    """

    def __init__(
        self,
        apply: Callable[[str, Mapping[str, list[int]]], None],
        *,
        clock: Callable[[], int],
        delay: float,
        interval: float = 0.0,
        timing: Clock = SYSTEM,
    ) -> None:
        self._apply = apply
        self._clock = clock
        self._timing = timing
        self.delay = delay
        self.interval = interval
        self._written: dict[str, float] = {}  # scope → monotonic time of its last flush
        self._pending: dict[str, Hits] = {}  # scope → id → [hits, latest hit ms]
        self._lock = threading.Condition(threading.Lock())
        self._flush_lock = threading.Lock()
        self._due: float | None = None  # when the timer flushes next (on `timing`), None = not armed
        self._timer: threading.Thread | None = None
        self._closed = False
        self._atexit: Callable[[], None] | None = None
        #: Background flushes run so far, whether or not a scope was due (tests wait on it).
        self.timer_runs = 0

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
        """Have the timer flush in `seconds` unless it is armed already; holds `_lock`."""
        if self._due is None and not self._closed:
            self._due = self._timing.monotonic() + max(0.0, seconds)
            if self._timer is None:
                self._timer = threading.Thread(target=self._run_timer, name="dsh-memory-touches", daemon=True)
                self._timer.start()
            else:
                self._lock.notify()

    def _disarm(self) -> None:
        """Cancel the armed flush; holds `_lock`."""
        self._due = None
        self._lock.notify()

    def _run_timer(self) -> None:
        """The timer thread: a background flush each time `_due` comes; ends when not armed."""
        while True:
            with self._lock:
                while True:
                    if self._closed or self._due is None:
                        self._timer = None
                        return
                    wait = self._due - self._timing.monotonic()
                    if wait <= 0:
                        self._due = None
                        break
                    self._timing.wait(self._lock, wait)
            self._flush(force=False)
            with self._lock:
                self.timer_runs += 1

    def flush(self) -> None:
        """Write every pending hit now, per scope one `apply`; failures stay pending (logged only)."""
        self._flush(force=True)

    def _flush(self, *, force: bool) -> None:
        with self._flush_lock:
            now = self._timing.monotonic()
            with self._lock:
                if force:
                    pending, self._pending = self._pending, {}
                else:
                    due = {s for s in self._pending if now - self._written.get(s, -math.inf) >= self.interval}
                    pending = {s: h for s, h in self._pending.items() if s in due}
                    self._pending = {s: h for s, h in self._pending.items() if s not in due}
                self._disarm()
            for scope, hits in pending.items():
                try:
                    self._apply(scope, hits)
                except (DshMemoryError, OSError) as exc:
                    logger.warning("更新 %s 的访问计数失败,稍后重试:%s", scope, exc)
                    with self._lock:
                        _merge(self._pending.setdefault(scope, {}), hits)
                else:
                    with self._lock:
                        self._written[scope] = self._timing.monotonic()
            with self._lock:
                if self._pending:  # not due yet, or failed: try again when the first one is due
                    now = self._timing.monotonic()
                    waits = [self._written.get(s, -math.inf) + self.interval - now for s in self._pending]
                    self._arm(max(self.delay, min(waits)))

    def close(self) -> None:
        """Flush pending hits and stop the timer. Idempotent; the buffer stays usable."""
        with self._lock:
            self._closed = True
            self._disarm()
            callback, self._atexit = self._atexit, None
        if callback is not None:
            atexit.unregister(callback)
        self.flush()
