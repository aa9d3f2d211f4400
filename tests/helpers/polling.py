"""Waiting for a condition instead of sleeping for a guess: `until(what, check)`.

A fixed sleep is too short on a loaded machine and too long on an idle one; polling what the
test is waiting for (a counter in serve's `/health`, a file, a process state) under a generous
deadline is neither. The 20 ms between checks is a poll interval, not a barrier.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["until"]

T = TypeVar("T")


def until(what: str, check: Callable[[], T], timeout: float = 30.0, every: float = 0.02) -> T:
    """`check()`'s first truthy value, polled every `every` s; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what} (last: {value!r})")
        time.sleep(every)
