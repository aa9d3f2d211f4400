"""Lock and `.break` paths that are links, directories, FIFOs or garbage: within the lock budget,
without spinning, never a wedge."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.errors import LockTimeout
from dsh_memory_mcp.store.locks import LockManager

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="symlinks and FIFOs")


def manager_and_path(tmp_path: Path, **kw: float) -> tuple[LockManager, Path]:
    manager = LockManager(str(tmp_path / ".locks"), **kw)
    path = Path(manager.lock_path("global"))
    path.parent.mkdir(parents=True, exist_ok=True)
    return manager, path


def timed_hold(manager: LockManager) -> tuple[float, float]:
    """(wall seconds, CPU seconds) to take and release the lock `global`."""
    wall, cpu = time.monotonic(), time.process_time()
    with manager.hold("global"):
        pass
    return time.monotonic() - wall, time.process_time() - cpu


@posix_only
def test_a_lock_that_is_a_dangling_symlink_is_removed_after_the_grace_without_spinning(tmp_path: Path):
    manager, path = manager_and_path(tmp_path, timeout=10.0)
    target = tmp_path / "nowhere"
    path.symlink_to(target)
    wall, cpu = timed_hold(manager)
    print(f"dangling symlink lock: taken after {wall:.2f} s, {cpu:.2f} s CPU")
    assert 1.5 <= wall < 5.0
    assert cpu < 0.5 * wall  # waiting, not spinning (today: 98 % CPU, forever)
    assert not target.exists() and not os.path.lexists(path)


@posix_only
def test_a_lock_that_is_a_symlink_to_a_file_is_removed_as_a_link_and_its_target_kept(tmp_path: Path):
    manager, path = manager_and_path(tmp_path, timeout=10.0, unreadable_grace=0.2)
    target = tmp_path / "precious.txt"
    target.write_bytes(b'{"pid":1,"host":"x","createdAt":1}')
    path.symlink_to(target)
    timed_hold(manager)
    assert target.read_bytes() == b'{"pid":1,"host":"x","createdAt":1}'


@posix_only
def test_a_fifo_at_the_lock_path_neither_blocks_nor_wedges(tmp_path: Path):
    manager, path = manager_and_path(tmp_path, timeout=10.0, unreadable_grace=0.2)
    os.mkfifo(path)
    wall, _ = timed_hold(manager)
    assert wall < 2.0 and not os.path.lexists(path)


def test_an_empty_directory_at_the_lock_path_is_removed_after_the_grace(tmp_path: Path):
    manager, path = manager_and_path(tmp_path, timeout=10.0, unreadable_grace=0.2)
    path.mkdir()
    wall, _ = timed_hold(manager)
    assert wall < 2.0 and not path.exists()


def test_a_directory_with_content_at_the_lock_path_times_out_within_the_budget_naming_it(tmp_path: Path):
    manager, path = manager_and_path(tmp_path, timeout=1.0, unreadable_grace=0.2)
    path.mkdir()
    (path / "keep").write_text("x", encoding="utf-8")
    start = time.monotonic()
    with pytest.raises(LockTimeout) as info, manager.hold("global"):
        pass
    assert time.monotonic() - start < 2.0
    assert str(path) in info.value.message and "手动删除" in info.value.message
    assert (path / "keep").read_text(encoding="utf-8") == "x"


@posix_only
def test_a_garbage_marker_and_a_dangling_break_symlink_are_both_cleared_within_the_budget(tmp_path: Path):
    manager, path = manager_and_path(tmp_path, timeout=10.0)
    path.write_bytes(b"\x00garbage\xff")
    breaker = Path(str(path) + ".break")
    breaker.symlink_to(tmp_path / "gone")
    wall, cpu = timed_hold(manager)
    print(f"garbage marker + dangling .break: taken after {wall:.2f} s, {cpu:.2f} s CPU")
    assert wall < 9.0 and cpu < 0.5 * wall
    assert not os.path.lexists(breaker) and not os.path.lexists(path)


def test_a_directory_at_the_break_path_is_cleared_within_the_budget(tmp_path: Path):
    manager, path = manager_and_path(tmp_path, timeout=10.0, unreadable_grace=0.2, breaker_stale=0.5)
    path.write_bytes(b"")
    breaker = Path(str(path) + ".break")
    breaker.mkdir()
    wall, _ = timed_hold(manager)
    assert wall < 3.0 and not breaker.exists()
