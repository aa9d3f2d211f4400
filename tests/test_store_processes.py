"""Real processes writing one store at once: nothing lost, crashed holders and failed writes recovered."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.shared import SharedStore, records
from tests.helpers.store_procs import Worker, reaped

pytestmark = pytest.mark.slow

PROJECT = "project:/home/me/app"


def leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*.tmp")] + [str(p) for p in root.rglob("*.break")]


def test_many_processes_saving_at_once_lose_nothing(store_dir: Path, tmp_path: Path):
    SharedStore(str(store_dir)).prepare()
    go = tmp_path / "go"
    plan = [(PROJECT, f"p{n}") for n in range(8)] + [("global", "g0"), ("session:other", "s0")]
    per_process = 25
    with reaped([]) as workers:
        for scope, tag in plan:
            workers.append(Worker("save", str(store_dir), scope, str(per_process), tag, str(go)))
        for worker in workers:
            worker.expect("ready")
        start = time.monotonic()
        go.touch()
        for worker in workers:
            worker.expect(f"done {per_process}", timeout=60)
            rc, _, err = worker.rest()
            assert rc == 0, err
        elapsed = time.monotonic() - start
    print(f"{len(plan)} processes x {per_process} saves (8 on one scope) in {elapsed:.2f} s")

    store = SharedStore(str(store_dir))
    for scope in (PROJECT, "global", "session:other"):
        raw = Path(store.scope_path(scope)).read_text(encoding="utf-8")
        lines = records.parse_lines(raw)
        assert all(isinstance(line, Record) for line in lines), f"{scope} has unparseable lines"
        contents = [line.content for line in lines if isinstance(line, Record)]
        expected = [f"{tag} #{i}" for s, tag in plan if s == scope for i in range(per_process)]
        assert sorted(contents) == sorted(expected)  # every record exactly once
        assert len({line.id for line in lines if isinstance(line, Record)}) == len(expected)
    assert leftovers(store_dir) == []
    assert os.listdir(store_dir / ".locks") == []


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_writer_killed_while_holding_the_lock_delays_the_next_one_only_briefly(store_dir: Path):
    store = SharedStore(str(store_dir))
    store.prepare()
    for i in range(5):
        store.save(PROJECT, f"before the crash #{i}")
    before = Path(store.scope_path(PROJECT)).read_bytes()
    with reaped([Worker("hold", str(store_dir), PROJECT)]) as (holder,):
        holder.expect("locked")
        lock = Path(store.root) / ".locks" / os.path.basename(store._locks.lock_path(PROJECT))
        assert json.loads(lock.read_bytes())["pid"] == holder.proc.pid
        start = time.monotonic()
        holder.proc.send_signal(signal.SIGKILL)
        holder.proc.wait(timeout=10)  # reaped, as the IDE host would: a zombie still counts as alive
        result = SharedStore(str(store_dir)).save(PROJECT, "after the crash")
        recovery = time.monotonic() - start
    print(f"stale lock of a SIGKILLed holder recovered in {recovery:.3f} s")
    assert recovery < 5.0
    data = Path(store.scope_path(PROJECT)).read_bytes()
    assert data.startswith(before)
    assert data[len(before) :] == result.record.raw.encode() + b"\n"
    assert not lock.exists()
    assert leftovers(store_dir) == []


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE")
def test_a_write_that_fails_midway_leaves_the_old_file_byte_identical(store_dir: Path):
    store = SharedStore(str(store_dir))
    store.prepare()
    for i in range(40):
        store.save("global", f"记忆 {i}: " + "内容" * 100)
    path = Path(store.scope_path("global"))
    before = path.read_bytes()
    limit = 16 * 1024
    assert len(before) > limit  # the rewrite must cross the limit, not only the new line
    with reaped([Worker("fsize", str(store_dir), "global", str(limit), "2000")]) as (child,):
        rc, out, err = child.rest(timeout=60)
    assert (rc, out) == (3, ["STORE_ERROR"]), err
    assert str(path) in err  # the Chinese message names the file
    assert path.read_bytes() == before
    assert leftovers(store_dir) == []
    assert os.listdir(store_dir / ".locks") == []
