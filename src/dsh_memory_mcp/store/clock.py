"""Time as a parameter: code that waits takes a `Clock` (default `SYSTEM`, real time); a test
passes one it moves by hand. Waits inside other libraries and a thread lock's
``acquire(timeout=…)`` still take real seconds (computed from the clock's readings).
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
        """`waitable.wait(timeout)`: True when set or notified in time (callers re-check their
        condition afterwards, so a test clock may return early)."""
        return waitable.wait(timeout)


#: The real clock every production caller uses.
SYSTEM: Final = Clock()
