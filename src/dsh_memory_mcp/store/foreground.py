"""Calls in flight, and background work (the warm-up) that gives way to them: a CPU-bound thread
holds the GIL against a call's lock-holding critical section, so background work asks
`Foreground.pause` where it holds no lock anybody may need, and waits while calls run.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator

from dsh_memory_mcp.store.clock import SYSTEM, Clock

#: Background work resumes only once no call has run for this long: a host sending calls back to
#: back leaves gaps of a round trip between them, which are no time to start a chunk in.
QUIET_SECS = 0.05
#: How often a pause re-checks its `resume` condition (someone waits for what it holds).
RECHECK_SECS = 0.01


class Foreground:
    """How many tool calls run now in this process (`call`), and a wait for them (`pause`).

    Thread-safe. One per process (`FOREGROUND`): the GIL is shared by every thread of it.
    """

    def __init__(self, clock: Clock = SYSTEM, *, quiet: float = QUIET_SECS) -> None:
        self.clock = clock
        self.quiet = quiet
        self._cond = threading.Condition()
        self._in_flight = 0
        self._ended = -math.inf  # when the last call ended (on `clock`)
        #: ``calls`` (started), ``pauses`` (background waits that had to wait).
        self.stats: Counter[str] = Counter()

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Count the ``with`` block as a call in flight."""
        with self._cond:
            self._in_flight += 1
            self.stats["calls"] += 1
        try:
            yield
        finally:
            with self._cond:
                self._in_flight -= 1
                self._ended = self.clock.monotonic()
                self._cond.notify_all()

    def pause(self, resume: Callable[[], bool] | None = None) -> float:
        """Wait while a call runs or ended less than `quiet` ago; the seconds waited (0.0: idle at once).

        Call it only where the caller holds no lock a call might wait for — or pass `resume`,
        which is asked every `RECHECK_SECS` and ends the wait when true (a call now waits for
        what the caller holds: carry on, the call needs it done).
        """
        started = self.clock.monotonic()
        waited = False
        with self._cond:
            while True:
                now = self.clock.monotonic()
                if self._in_flight == 0 and now - self._ended >= self.quiet:
                    break
                if resume is not None and resume():
                    break
                if not waited:
                    waited = True
                    self.stats["pauses"] += 1
                step = RECHECK_SECS if resume is not None or self._in_flight else self.quiet - (now - self._ended)
                self.clock.wait(self._cond, max(0.001, step))
        return self.clock.monotonic() - started if waited else 0.0


#: The process's calls: `MemoryService.call` counts each tool call here.
FOREGROUND = Foreground()
