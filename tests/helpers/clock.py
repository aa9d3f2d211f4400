"""A `Clock` that moves only when a test (or, with ``auto``, a sleeper) moves it.

`FakeClock(auto=True)` — the default — is time that passes only by sleeping: every `sleep(s)`
moves it `s` forward at once, so a lock waiter polling for 10 s gives up after its 10 s without
10 real seconds. `FakeClock(auto=False)` stands still until `advance`; a sleeper blocks until it
has been moved far enough. Either way `wait(waitable, timeout)` waits a few real milliseconds and
returns, so the background threads that wait on it (heartbeat, touch timer, vector worker)
re-read this clock and act when `advance` made something due.

The wall clock starts at the real time (plus `offset`), so file mtimes compare sensibly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from dsh_memory_mcp.store.clock import Clock, Waitable

__all__ = ["FakeClock"]

_SLICE = 0.005  # real seconds a `wait` lasts at most


class FakeClock(Clock):
    def __init__(self, *, auto: bool = True, offset: float = 0.0, on_sleep: Callable[[float], None] | None = None):
        self._moved = threading.Condition()
        self._mono = 1_000.0
        self._wall = time.time() + offset
        self.auto = auto
        self.on_sleep = on_sleep
        #: How many times code under test slept on this clock (a count of its polls).
        self.sleeps = 0

    def monotonic(self) -> float:
        with self._moved:
            return self._mono

    def time(self) -> float:
        with self._moved:
            return self._wall

    def advance(self, seconds: float) -> None:
        with self._moved:
            self._mono += seconds
            self._wall += seconds
            self._moved.notify_all()

    def sleep(self, seconds: float) -> None:
        with self._moved:
            self.sleeps += 1
        if self.on_sleep is not None:
            self.on_sleep(seconds)
        if self.auto:
            self.advance(max(0.0, seconds))
            time.sleep(0)  # let other threads run, as a real sleep would
            return
        with self._moved:
            until = self._mono + seconds
            while self._mono < until:
                self._moved.wait(1.0)

    def wait(self, waitable: Waitable, timeout: float | None) -> bool:
        return waitable.wait(_SLICE if timeout is None else min(_SLICE, max(0.0, timeout)))
