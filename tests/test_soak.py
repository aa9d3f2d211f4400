"""A bounded crash-consistency soak: 8 writer processes on shared scopes, random SIGKILLs, ~25 s.
Every acknowledged save must be on disk exactly once afterwards."""

from __future__ import annotations

import queue
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.store.records import CorruptLine, Record, parse_lines
from dsh_memory_mcp.store.shared import SharedStore
from tests.helpers.store_procs import StallWorker as Child

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")]

SCOPES = ["global", "project:/soak/app", "team notes"]
WRITERS = 8
SECONDS = 25.0


def drain(child: Child, acked: list[tuple[int, str]], *, to_eof: bool = False) -> None:
    """Collect the acks a child printed; `to_eof`: it is dead, read everything left in the pipe."""
    while True:
        try:
            line = child.lines.get(timeout=10) if to_eof else child.lines.get_nowait()
        except queue.Empty:
            return
        if line is None:
            return
        if line.startswith("ack "):
            _, k, rid = line.split()
            acked.append((int(k), rid))


def test_random_sigkills_of_concurrent_writers_lose_no_acknowledged_save_and_duplicate_none(store_dir: Path):
    SharedStore(str(store_dir)).prepare()
    rng = random.Random(20261201)
    acked: list[tuple[int, str]] = []
    kills = 0
    spawned = 0
    live: list[Child] = []

    def spawn() -> Child:
        nonlocal spawned
        spawned += 1
        child = Child("soak", str(store_dir), f"w{spawned}", *SCOPES)
        live.append(child)
        return child

    try:
        for _ in range(WRITERS):
            spawn()
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.6))
            victim = live.pop(rng.randrange(len(live)))
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait(timeout=10)
            kills += 1
            drain(victim, acked, to_eof=True)
            victim.kill()
            spawn()
            for child in live:
                drain(child, acked)
    finally:
        for child in live:
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGKILL)
                child.proc.wait(timeout=10)
            drain(child, acked, to_eof=True)
            child.kill()

    store = SharedStore(str(store_dir))
    lost = dup = torn = 0
    for k, scope in enumerate(SCOPES):
        path = Path(store.scope_path(scope))
        lines = parse_lines(path.read_text(encoding="utf-8")) if path.exists() else []
        # Linux may end a write() between pages when its writer is SIGKILLed: a killed writer can leave the
        # start of its (unacknowledged) line. It is kept as a corrupt line and the next append starts on a
        # new line; anything else that is not a record is a bug.
        for line in lines:
            if isinstance(line, CorruptLine):
                assert line.raw.startswith('{"'), f"{scope}: a corrupt line that is not a torn record: {line.raw[:200]!r}"
                torn += 1
            else:
                assert isinstance(line, Record), f"{scope}: {line!r}"
        on_disk = [line.id for line in lines if isinstance(line, Record)]
        contents = [line.content for line in lines if isinstance(line, Record)]
        dup += len(on_disk) - len(set(on_disk)) + len(contents) - len(set(contents))
        lost += len({rid for kk, rid in acked if kk == k} - set(on_disk))
    print(
        f"soak: {spawned} writers, {kills} SIGKILLs, {len(acked)} acknowledged saves, {lost} lost, {dup} duplicated,"
        f" {torn} torn lines of killed writers"
    )
    assert kills >= 20 and len(acked) >= 200
    assert torn <= kills
    assert lost == 0 and dup == 0
    assert store.missing() == {}  # nothing erased behind the journal's back either
    SharedStore(str(store_dir)).prepare()  # a start sweeps what the killed writers left
    assert not [p for p in store_dir.rglob("*.tmp")]
