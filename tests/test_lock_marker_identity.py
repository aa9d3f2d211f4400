"""An empty marker is only judged stale when it is the very same file, seen without interruption.

Lock files are created and removed many times a second, and a new one may get a freed inode
number back. Judging "unchanged for 2 s" by inode alone once let a waiter break a live holder's
freshly created (still empty) lock under 16 concurrent writers, and a save was lost.
"""

from __future__ import annotations

import json

from dsh_memory_mcp.store.locks import LockManager, _Seen
from tests.helpers.clock import FakeClock

# Time moves only by `advance`; each observation's mtime is "now" on that clock, so only the
# manager's own "seen unchanged for" can make a marker stale here.
clock = FakeClock(auto=False)


def _seen(content: bytes, *, ino: int = 42, mtime_ns: int) -> _Seen:
    return _Seen(content, 1, ino, clock.time(), mtime_ns)


def test_the_same_empty_marker_seen_past_the_grace_is_stale(tmp_path):
    manager = LockManager(str(tmp_path), unreadable_grace=0.05, clock=clock)
    path = str(tmp_path / "x.lock")
    assert manager._stale_reason(path, _seen(b"", mtime_ns=1)) is None
    clock.advance(0.08)
    assert manager._stale_reason(path, _seen(b"", mtime_ns=1)) is not None


def test_a_new_lock_file_that_reuses_the_inode_number_is_not_stale(tmp_path):
    manager = LockManager(str(tmp_path), unreadable_grace=0.05, clock=clock)
    path = str(tmp_path / "x.lock")
    assert manager._stale_reason(path, _seen(b"", mtime_ns=1)) is None
    clock.advance(0.08)
    assert manager._stale_reason(path, _seen(b"", mtime_ns=2)) is None  # another file, same inode


def test_seeing_a_written_marker_in_between_restarts_the_clock(tmp_path):
    manager = LockManager(str(tmp_path), unreadable_grace=0.05, clock=clock)
    path = str(tmp_path / "x.lock")
    assert manager._stale_reason(path, _seen(b"", mtime_ns=1)) is None
    # A written marker (a foreign host's, so no pid check applies) between the two empty ones.
    foreign_live = _Seen(
        json.dumps({"pid": 1, "host": "elsewhere", "createdAt": int(clock.time() * 1000)}).encode(),
        1,
        43,
        clock.time(),
        5,
    )
    assert manager._stale_reason(path, foreign_live) is None
    clock.advance(0.08)
    assert manager._stale_reason(path, _seen(b"", mtime_ns=1)) is None  # the clock started again
