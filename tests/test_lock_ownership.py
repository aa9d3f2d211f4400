"""Lock ownership: a stalled holder never commits over the next holder's work; live holders are
never broken; markers are refreshed while held and aged by what is observed here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_memory_mcp.errors import LockTimeout
from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.locks import LockLost, LockManager
from dsh_memory_mcp.store.records import Record, parse_lines
from dsh_memory_mcp.store.shared import SharedStore
from tests.helpers.clock import FakeClock
from tests.helpers.lock_markers import marker, plant
from tests.helpers.store_procs import StallWorker

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP/SIGCONT")


@pytest.fixture
def children() -> Iterator[list[StallWorker]]:
    made: list[StallWorker] = []
    try:
        yield made
    finally:
        for child in made:
            child.kill()


def wait_stopped(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    raise AssertionError("the holder never stopped")


def ids_on_disk(store: SharedStore, scope: str) -> list[str]:
    text = Path(store.scope_path(scope)).read_text(encoding="utf-8")
    return [line.id for line in parse_lines(text) if isinstance(line, Record)]


def lost(acked: list[str], on_disk: list[str]) -> int:
    return len(set(acked) - set(on_disk))


@posix_only
@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process state from /proc")
def test_a_live_holder_stalled_inside_its_write_is_waited_for_and_no_acknowledged_save_is_lost(
    store_dir: Path, children: list[StallWorker]
):
    store = SharedStore(str(store_dir))
    store.prepare()
    store.save("global", "before")
    holder = StallWorker("stall", str(store_dir), "global")
    children.append(holder)
    assert holder.next() == "stopping"
    wait_stopped(holder.proc.pid)  # stopped holding the lock, right before its rename
    # Locks "stale" after 2 s, and a wall clock an hour ahead: to this waiter the stopped holder's
    # marker is an hour old, past any age limit (a live holder was once broken by age).
    other = StallWorker("saves", str(store_dir), "global", "20", "2", "3600")
    children.append(other)
    assert other.next() == "waiting"  # it has judged the held marker 20 times and not broken it
    holder.proc.send_signal(signal.SIGCONT)
    acked = [line.split()[1] for line in other.until("done") if line.startswith("ack ")]
    holder_says = holder.next()
    if holder_says.startswith("ack "):
        acked.append(holder_says.split()[1])
    on_disk = ids_on_disk(store, "global")
    print(f"stalled holder: {len(acked)} acknowledged, {lost(acked, on_disk)} lost")
    assert holder_says.startswith("ack ")  # alive on this host: never broken, its save went through
    assert len(acked) == 21 and lost(acked, on_disk) == 0
    assert len(on_disk) == len(set(on_disk)) == 22


@posix_only
@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process state from /proc")
def test_a_holder_whose_lock_was_broken_while_it_stalled_fails_instead_of_erasing_the_next_holders_saves(
    store_dir: Path, children: list[StallWorker]
):
    store = SharedStore(str(store_dir))
    store.prepare()
    store.save("global", "before")
    holder = StallWorker("stall", str(store_dir), "global")
    children.append(holder)
    assert holder.next() == "stopping"
    wait_stopped(holder.proc.pid)
    # Another implementation (or a waiter on another host) judges the lock stale and breaks it.
    lock = Path(store._locks.lock_path("global"))
    assert json.loads(lock.read_bytes())["pid"] == holder.proc.pid
    lock.unlink()
    other = StallWorker("saves", str(store_dir), "global", "20", "30")
    children.append(other)
    acked = [line.split()[1] for line in other.until("done") if line.startswith("ack ")]
    assert len(acked) == 20
    holder.proc.send_signal(signal.SIGCONT)
    holder_says = holder.next()
    on_disk = ids_on_disk(store, "global")
    print(f"broken holder: said {holder_says!r}; {lost(acked, on_disk)} of {len(acked)} acknowledged saves lost")
    assert holder_says == "error LOCK_TIMEOUT"  # not acknowledged over the other's work
    assert lost(acked, on_disk) == 0 and len(on_disk) == 21
    assert not any(p.name.endswith(".tmp") for p in store_dir.rglob("*"))


def test_a_live_holder_on_this_host_is_never_broken_whatever_its_age(tmp_path: Path):
    clock = FakeClock()  # the 1 s wait passes by the waiter's own polls
    manager = LockManager(str(tmp_path), timeout=1.0, stale_after=0.2, clock=clock)
    path = Path(manager.lock_path("global"))
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # Written by the live holder 0.5 s ago, by its createdAt; untouched for an hour, by mtime.
        content = marker(holder.pid, created_ms=time.time_ns() // 1_000_000 - 500)
        plant(path, content, age=3600)
        with pytest.raises(LockTimeout), manager.hold("global"):
            pass
        assert path.read_bytes() == content
        assert clock.sleeps > 10  # judged many times over the whole wait, never broken
    finally:
        holder.kill()
        holder.wait()


def test_a_held_marker_is_refreshed_while_it_is_held(tmp_path: Path):
    clock = FakeClock(auto=False)
    manager = LockManager(str(tmp_path), clock=clock)
    path = Path(manager.lock_path("global"))
    with manager.hold("global"):
        os.utime(path, (time.time() - 100, time.time() - 100))
        clock.advance(30.0)  # the heartbeat is due (every stale_after / 6 s on its clock; not real seconds)
        deadline = time.monotonic() + 10
        while time.time() - path.stat().st_mtime > 5:
            assert time.monotonic() < deadline, "the heartbeat never refreshed the marker"
            time.sleep(0.01)


def test_a_foreign_marker_whose_created_at_lies_in_the_future_is_broken_once_not_refreshed(tmp_path: Path):
    manager = LockManager(str(tmp_path), timeout=5.0)
    path = Path(manager.lock_path("global"))
    future = time.time_ns() // 1_000_000 + 3_600_000  # a foreign clock an hour ahead
    plant(path, marker(12345, host="another-host", created_ms=future), age=31)
    start = time.monotonic()
    with manager.hold("global"):
        pass
    assert time.monotonic() - start < 1.0


def test_a_refreshed_foreign_marker_is_not_broken_even_if_its_created_at_is_old(tmp_path: Path):
    manager = LockManager(str(tmp_path), timeout=0.5)
    path = Path(manager.lock_path("global"))
    content = marker(12345, host="another-host", created_ms=time.time_ns() // 1_000_000 - 3_600_000)
    plant(path, content)  # mtime now: its holder refreshed it (or a foreign clock lags an hour)
    with pytest.raises(LockTimeout), manager.hold("global"):
        pass
    assert path.read_bytes() == content


def test_a_foreign_marker_with_a_future_mtime_is_broken_after_stale_after_as_observed_here(tmp_path: Path):
    clock = FakeClock()  # time passes by the waiter's polls only
    manager = LockManager(str(tmp_path), timeout=5.0, stale_after=1.0, clock=clock)
    path = Path(manager.lock_path("global"))
    plant(path, marker(12345, host="another-host"))
    ahead = time.time() + 3600  # a file server whose clock is an hour ahead
    os.utime(path, (ahead, ahead))
    start = clock.monotonic()
    with manager.hold("global"):
        pass
    # Broken once this waiter had seen it unchanged for stale_after (1 s), not at once, not at 5 s.
    assert 1.0 <= clock.monotonic() - start < 1.1


def test_a_commit_under_a_lock_that_is_no_longer_ours_is_refused_and_leaves_the_target_alone(tmp_path: Path):
    manager = LockManager(str(tmp_path / ".locks"))
    path = Path(manager.lock_path("global"))
    target = tmp_path / "global.jsonl"
    target.write_bytes(b"theirs\n")
    with manager.hold("global"):
        path.unlink()
        plant(path, marker(os.getppid()))  # the next holder's marker
        fd, tmp = fileio.new_tmp(str(target))
        with pytest.raises(LockLost) as info:
            fileio.commit(fd, tmp, str(target), b"ours\n")
    assert (
        info.value.code == "LOCK_TIMEOUT" and "不属于本进程" in info.value.message and str(path) in info.value.message
    )
    assert target.read_bytes() == b"theirs\n"
    assert not Path(tmp).exists()
    assert path.exists()  # the other holder's marker is not removed on our release


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times from /proc")
def test_a_marker_whose_pid_now_belongs_to_a_younger_process_is_broken_at_once(tmp_path: Path):
    manager = LockManager(str(tmp_path), timeout=5.0)
    path = Path(manager.lock_path("global"))
    younger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # The marker is an hour older than the process now carrying its pid: the holder died.
        plant(path, marker(younger.pid, created_ms=time.time_ns() // 1_000_000 - 3_600_000))
        start = time.monotonic()
        with manager.hold("global"):
            pass
        assert time.monotonic() - start < 1.0
    finally:
        younger.kill()
        younger.wait()
