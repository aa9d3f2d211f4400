"""Time as a parameter: the clock that code which waits reads and waits on.

The lock manager (lock waits, staleness, heartbeat), the touch buffer's timer, the tool gate's
deadlines and the embedding client (request deadlines, breaker, llama-server bring-up) take a
`Clock` and default to `SYSTEM`, which is plain `time.monotonic`/`time.time`/`time.sleep` and the
waitable's own timed `wait`. A test passes a clock it moves by hand, so a 30 s staleness limit or
a 2 s timer is checked without sleeping through it.

What a clock cannot stand in for: waits inside other libraries (an HTTP timeout, the event loop's
`move_on_after`) and a thread lock's ``acquire(timeout=…)`` still take real seconds (computed from
this clock's readings).
"""

from __future__ import annotations

import time
from typing import Final, Protocol


class Waitable(Protocol):
    """A `threading.Event` or a held `threading.Condition`: ``wait(timeout) -> bool``."""

    def wait(self, timeout: float | None = None) -> bool: ...


class Clock:
    """Real time. Subclass it to move time by hand (tests)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (deadlines, ages, intervals)."""
        return time.monotonic()

    def time(self) -> float:
        """Wall-clock seconds since the epoch (compared with file mtimes, written into markers)."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """Pause the calling thread for `seconds` (nothing for zero or less)."""
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, waitable: Waitable, timeout: float | None) -> bool:
        """`waitable.wait(timeout)`: True when it was set or notified before `timeout` seconds.

        Callers re-check their condition on this clock after it returns, so a clock whose
        seconds are not real ones may return early.
        """
        return waitable.wait(timeout)


#: The real clock every production caller uses.
SYSTEM: Final = Clock()
