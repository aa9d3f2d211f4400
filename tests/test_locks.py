"""LockManager: O_EXCL marker files shared with other implementations, plus the thread guard."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.errors import LockRecursion, LockTimeout
from dsh_memory_mcp.store import locks
from dsh_memory_mcp.store.locks import LockManager
from dsh_memory_mcp.store.scopes import scope_sha1
from tests.helpers.lock_markers import HOST, dead_pid, marker, now_ms, plant
from tests.helpers.store_procs import Worker, reaped


@pytest.fixture
def locks_dir(tmp_path: Path) -> Path:
    return tmp_path / "store" / ".locks"


def test_the_lock_file_is_named_by_the_sha1_of_the_name_and_holds_the_shared_marker_format(locks_dir: Path):
    manager = LockManager(str(locks_dir))
    path = locks_dir / f"{scope_sha1('project:/home/me/app')}.lock"
    assert manager.lock_path("project:/home/me/app") == str(path)
    before = now_ms()
    with manager.hold("project:/home/me/app"):
        raw = path.read_bytes()
        data = json.loads(raw)
        assert list(data) == ["pid", "host", "createdAt", "nonce"]
        assert data["pid"] == os.getpid()
        assert data["host"] == HOST
        assert before <= data["createdAt"] <= now_ms()
        assert b" " not in raw  # compact JSON, as JSON.stringify writes it
        if os.name == "posix":
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not path.exists()


def test_the_lock_directory_is_created_private_on_first_use(locks_dir: Path):
    manager = LockManager(str(locks_dir))
    assert not locks_dir.exists()
    with manager.hold("global"):
        pass
    assert locks_dir.is_dir()
    if os.name == "posix":
        assert stat.S_IMODE(locks_dir.stat().st_mode) == 0o700
    assert os.listdir(locks_dir) == []


def test_the_same_thread_asking_again_gets_lock_recursion_at_once(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=5.0)
    with manager.hold("global"):
        start = time.monotonic()
        with pytest.raises(LockRecursion) as info, manager.hold("global"):
            pass
        assert time.monotonic() - start < 0.5
        assert info.value.code == "LOCK_RECURSION"
        assert info.value.lock_file == manager.lock_path("global")
        # The failed attempt must not have released the outer hold.
        assert os.path.exists(manager.lock_path("global"))
        with manager.hold("another scope"):
            pass
    assert not os.path.exists(manager.lock_path("global"))


def test_recursion_is_detected_across_two_managers_of_one_directory(locks_dir: Path):
    first, second = LockManager(str(locks_dir)), LockManager(str(locks_dir), timeout=5.0)
    with first.hold("global"):
        start = time.monotonic()
        with pytest.raises(LockRecursion), second.hold("global"):
            pass
        assert time.monotonic() - start < 0.5


def test_a_marker_held_by_a_live_foreign_process_times_out_with_a_chinese_message(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=0.3)
    path = Path(manager.lock_path("global"))
    content = marker(os.getppid(), host="another-host")
    plant(path, content)
    start = time.monotonic()
    with pytest.raises(LockTimeout) as info, manager.hold("global"):
        pass
    waited = time.monotonic() - start
    assert 0.25 <= waited < 1.5
    assert info.value.code == "LOCK_TIMEOUT"
    assert str(path) in info.value.message
    assert "另一个进程" in info.value.message and "稍后重试" in info.value.message
    assert path.read_bytes() == content  # a live holder's marker is never touched


def test_a_live_holder_on_this_host_is_waited_for(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=0.3)
    path = Path(manager.lock_path("global"))
    content = marker(os.getppid())
    plant(path, content)
    with pytest.raises(LockTimeout), manager.hold("global"):
        pass
    assert path.read_bytes() == content


def test_a_stale_lock_from_a_dead_process_is_broken_at_once(locks_dir: Path, caplog: pytest.LogCaptureFixture):
    manager = LockManager(str(locks_dir), timeout=5.0)
    path = Path(manager.lock_path("global"))
    plant(path, marker(dead_pid()))
    start = time.monotonic()
    with manager.hold("global"):
        assert json.loads(path.read_bytes())["pid"] == os.getpid()
    assert time.monotonic() - start < 0.5
    assert not path.exists()
    assert not Path(str(path) + ".break").exists()
    assert any("陈旧锁" in r.getMessage() for r in caplog.records)


def test_a_foreign_host_lock_not_refreshed_for_stale_after_is_broken(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=5.0)
    path = Path(manager.lock_path("global"))
    plant(path, marker(os.getppid(), host="another-host", created_ms=now_ms() - 31_000), age=31)
    start = time.monotonic()
    with manager.hold("global"):
        pass
    assert time.monotonic() - start < 0.5


def test_a_foreign_marker_format_is_judged_by_its_mtime(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=0.3)
    path = Path(manager.lock_path("global"))
    plant(path, b'{"owner":"someone"}')
    with pytest.raises(LockTimeout), manager.hold("global"):
        pass
    plant(path, b'{"owner":"someone"}', age=40)
    with LockManager(str(locks_dir), timeout=2.0).hold("global"):
        pass


def test_a_leftover_marker_of_this_very_process_is_broken(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=2.0)
    path = Path(manager.lock_path("global"))
    plant(path, marker(os.getpid()))  # e.g. a hold whose release could not unlink
    start = time.monotonic()
    with manager.hold("global"):
        pass
    assert time.monotonic() - start < 0.5


def test_an_empty_marker_is_broken_after_it_stayed_empty_for_about_two_seconds(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=5.0)
    path = Path(manager.lock_path("global"))
    plant(path, b"")  # a holder that died between creating and writing its marker
    start = time.monotonic()
    with manager.hold("global"):
        pass
    waited = time.monotonic() - start
    print(f"empty marker broken after {waited:.2f} s")
    assert 1.5 <= waited < 3.5


def test_an_old_unparseable_marker_is_broken_at_once(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=5.0)
    path = Path(manager.lock_path("global"))
    plant(path, b'{"pid":12', age=10)
    start = time.monotonic()
    with manager.hold("global"):
        pass
    assert time.monotonic() - start < 0.5


def test_a_breaker_does_not_remove_a_marker_that_was_replaced_after_it_was_judged_stale(locks_dir: Path):
    """The race the breaker lock exists for: A breaks and re-takes, B must not unlink A's marker."""
    manager = LockManager(str(locks_dir))
    path = manager.lock_path("global")
    plant(Path(path), marker(dead_pid()))
    old = locks._read_marker(path)
    assert old is not None
    os.unlink(path)  # someone else broke it...
    fresh = marker(os.getppid())
    plant(Path(path), fresh)  # ...and took the lock
    assert manager._break(path, old, "test") is False
    assert Path(path).read_bytes() == fresh
    assert not Path(path + ".break").exists()


def test_a_breaker_waits_while_another_breaker_is_at_work(locks_dir: Path):
    manager = LockManager(str(locks_dir))
    path = manager.lock_path("global")
    plant(Path(path), marker(dead_pid()))
    old = locks._read_marker(path)
    assert old is not None
    plant(Path(path + ".break"), b'{"pid":1}')
    assert manager._break(path, old, "test") is False
    assert Path(path).exists()
    # A breaker file left by a breaker that died is cleared once it is a few seconds old.
    plant(Path(path + ".break"), b'{"pid":1}', age=10)
    assert manager._break(path, old, "test") is False  # this call clears it...
    assert not Path(path + ".break").exists()
    assert manager._break(path, old, "test") is True  # ...and the next one breaks the marker
    assert not Path(path).exists()


@pytest.mark.slow
def test_two_processes_breaking_the_same_stale_lock_never_both_hold_it(locks_dir: Path, tmp_path: Path):
    for stale in (marker(dead_pid()), b""):
        go = tmp_path / f"go-{len(stale)}"
        path = Path(LockManager(str(locks_dir)).lock_path("global"))
        plant(path, stale, age=10)
        with reaped([]) as workers:
            for _ in range(6):
                workers.append(Worker("span", str(locks_dir), "global", str(go), "0.05"))
            for worker in workers:
                worker.expect("ready")
            go.touch()
            for worker in workers:
                worker.expect("done")
                rc, _, err = worker.rest()
                assert rc == 0, err
        assert not path.exists()
        assert sorted(os.listdir(locks_dir)) == []


def test_threads_of_one_process_exclude_each_other(locks_dir: Path, tmp_path: Path):
    manager = LockManager(str(locks_dir), timeout=20.0)
    counter = tmp_path / "counter"
    counter.write_text("0", encoding="utf-8")
    inside = 0
    overlaps = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, overlaps
        for _ in range(40):
            with manager.hold("global"):
                with guard:
                    inside += 1
                    overlaps += inside > 1
                value = int(counter.read_text(encoding="utf-8"))
                time.sleep(0)
                counter.write_text(str(value + 1), encoding="utf-8")
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == 0
    assert counter.read_text(encoding="utf-8") == "320"
    assert os.listdir(locks_dir) == []


def test_a_thread_waiting_behind_another_thread_times_out_within_the_budget(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=0.3)
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with manager.hold("global"):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(5)
        start = time.monotonic()
        with pytest.raises(LockTimeout) as info, manager.hold("global"):
            pass
        assert 0.25 <= time.monotonic() - start < 1.5
        assert manager.lock_path("global") in info.value.message
    finally:
        release.set()
        thread.join()


def test_the_thread_wait_and_the_file_wait_share_one_budget(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=0.6)
    path = Path(manager.lock_path("global"))
    plant(path, marker(os.getppid(), host="another-host"))
    results: list[float] = []

    def waiter() -> None:
        start = time.monotonic()
        try:
            with manager.hold("global"):
                pass
        except LockTimeout:
            results.append(time.monotonic() - start)

    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3
    assert max(results) < 1.5


def test_a_marker_broken_while_held_is_not_removed_on_release(locks_dir: Path, caplog: pytest.LogCaptureFixture):
    manager = LockManager(str(locks_dir))
    path = Path(manager.lock_path("global"))
    other = marker(os.getppid(), host="another-host")
    with manager.hold("global"):
        os.unlink(path)  # what a waiter does to a holder it (wrongly) judged stale
        plant(path, other)  # and then it took the lock
    assert path.read_bytes() == other
    assert any("被其他进程当作陈旧锁清除" in r.getMessage() for r in caplog.records)


def test_the_in_process_guards_do_not_grow_with_every_scope_ever_saved(tmp_path: Path):
    from dsh_memory_mcp.store.shared import SharedStore

    store = SharedStore(str(tmp_path / "store"))
    before = len(locks._guards)
    try:
        for i in range(300):
            store.save(f"session:s{i:04d}", f"memory {i}")
    finally:
        store.close()
    assert len(locks._guards) <= before + 2
    assert len(list((tmp_path / "store").rglob("*.jsonl"))) >= 300


def test_a_released_guard_is_dropped_but_two_threads_still_exclude_each_other(locks_dir: Path):
    manager = LockManager(str(locks_dir), timeout=5.0)
    before = len(locks._guards)
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def first() -> None:
        with manager.hold("scope:x"):
            order.append("first in")
            inside.set()
            release.wait(5)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(5)
    assert len(locks._guards) == before + 1

    def second() -> None:
        with manager.hold("scope:x"):
            order.append("second in")

    t2 = threading.Thread(target=second)
    t2.start()
    key = os.path.abspath(manager.lock_path("scope:x"))
    deadline = time.monotonic() + 10
    while locks._guards[key].users < 2:  # the holder and, now, the waiter
        assert time.monotonic() < deadline, "the second thread never waited for the lock"
        time.sleep(0.005)
    assert order == ["first in"]
    release.set()
    t.join(5)
    t2.join(5)
    assert order == ["first in", "first out", "second in"]
    assert len(locks._guards) == before
    with manager.hold("scope:x"), pytest.raises(LockRecursion), manager.hold("scope:x"):
        pass
    assert len(locks._guards) == before


def test_a_missing_lock_directory_is_made_and_tried_even_after_a_stall_past_a_short_deadline(locks_dir: Path):
    """The first save into a new store makes `.locks`; a caller that stalled (a loaded machine) past
    its deadline before that first try must get the lock nobody holds, not a LOCK_TIMEOUT that blames
    another process (seen in CI with a 0.2 s timeout on two busy workers)."""
    from tests.helpers.clock import FakeClock

    class Stalling(FakeClock):
        def monotonic(self) -> float:
            value = super().monotonic()
            self.advance(1.0)  # every look at the clock finds a second gone: any deadline check fails
            return value

    manager = LockManager(str(locks_dir), timeout=0.2, clock=Stalling())
    assert not locks_dir.exists()
    with manager.hold("global"):
        assert (locks_dir / f"{scope_sha1('global')}.lock").is_file()
    assert locks_dir.is_dir()
