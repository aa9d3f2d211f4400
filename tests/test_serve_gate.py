"""`ToolGate` on its own: a real anyio loop, bodies that wait for the test (no SDK, no HTTP).

Nothing here sleeps to let something happen: the tests wait for the gate's own counters
(`running_calls`, `queued_calls`) and release the bodies themselves; only the gate's deadlines
take real time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from dsh_memory_mcp.errors import CallRefused
from dsh_memory_mcp.store.locks import LockManager
from dsh_memory_mcp.transports.gate import ANSWER_GRACE_SECS, ToolGate


async def _until(check: Callable[[], bool], what: str) -> None:
    """Poll `check` on the event loop (gate counters change as its tasks run) for up to 10 s."""
    with anyio.fail_after(10):
        while not check():
            await anyio.sleep(0.005)


def test_a_call_queued_past_its_deadline_is_busy_and_a_long_call_answers_deadline_but_keeps_its_slot():
    events: list[tuple[str, float]] = []

    async def scenario() -> dict[str, object]:
        out: dict[str, object] = {}
        release = anyio.Event()
        async with ToolGate(limit=1, deadline_secs=0.5).running() as gate:
            t0 = time.monotonic()

            async def long_body(deadline: float | None) -> str:
                await release.wait()  # runs past its deadline; cannot be interrupted
                events.append(("long finished", time.monotonic() - t0))
                return "late"

            async def quick_body(deadline: float | None) -> str:
                return "quick"

            async def call(name: str, body: object) -> None:
                try:
                    out[name] = await gate.run(body)  # type: ignore[arg-type]
                except CallRefused as exc:
                    out[name] = exc.code
                events.append((f"{name} answered", time.monotonic() - t0))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call, "long", long_body)
                await _until(lambda: gate.running_calls == 1, "the long call runs")
                tg.start_soon(call, "queued", quick_body)
                await _until(lambda: gate.queued_calls == 1, "the quick call waits for the slot")
                await _until(lambda: "long" in out and "queued" in out, "both are answered")
                out["running_after_deadline"] = gate.running_calls
                tg.start_soon(call, "after", quick_body)
                await _until(lambda: gate.queued_calls == 1, "the third call waits for the slot")
                release.set()
            out["running_at_end"] = gate.running_calls
        return out

    out = anyio.run(scenario)
    when = dict(events)
    # BUSY at the deadline (0.5 s); DEADLINE at the deadline plus the short grace a body gets to
    # answer for itself.
    assert out["queued"] == "BUSY" and 0.5 <= when["queued answered"] < when["long answered"]
    assert out["long"] == "DEADLINE" and when["long answered"] >= 0.5 + ANSWER_GRACE_SECS
    assert out["running_after_deadline"] == 1  # the overrunning body still holds its slot
    # The third call waited for that slot (freed when the long body ended) and ran.
    assert out["after"] == "quick" and when["after answered"] >= when["long finished"]
    assert out["running_at_end"] == 0


def test_draining_refuses_new_calls_and_waits_for_running_ones():
    order: list[str] = []

    async def scenario() -> tuple[object, bool]:
        release = anyio.Event()
        async with ToolGate(limit=4, deadline_secs=0).running() as gate:

            async def body(deadline: float | None) -> str:
                assert deadline is None  # 0 = no deadline
                await release.wait()
                return "done"

            result: dict[str, object] = {}

            async def call() -> None:
                result["value"] = await gate.run(body)

            async def drain() -> None:
                result["drained"] = await gate.drain(30.0)
                order.append("drained")

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await _until(lambda: gate.running_calls == 1, "the call runs")
                tg.start_soon(drain)
                await anyio.wait_all_tasks_blocked()  # the drain has looked and is waiting
                with pytest.raises(CallRefused) as refused:
                    await gate.run(body)
                assert refused.value.code == "BUSY"
                order.append("released")
                release.set()
            return result["value"], bool(result["drained"])

    value, drained = anyio.run(scenario)
    assert value == "done" and drained is True
    assert order == ["released", "drained"]  # the drain ended only once the running call had


def test_a_lock_wait_inside_a_gated_call_ends_at_the_call_deadline(tmp_path):
    import threading

    locks = LockManager(str(tmp_path / ".locks"), timeout=10.0)
    holding = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with locks.hold("global"):
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(5)

    async def scenario() -> tuple[str, float]:
        async with ToolGate(limit=2, deadline_secs=0.6).running() as gate:

            async def body(deadline: float | None) -> str:
                def wait_for_lock() -> str:
                    with locks.hold("global"):
                        return "got it"

                return await anyio.to_thread.run_sync(wait_for_lock)

            t0 = time.monotonic()
            try:
                await gate.run(body)
            except CallRefused as exc:
                return f"{exc.code} {exc.message}", time.monotonic() - t0
            return "no error", time.monotonic() - t0

    try:
        answer, took = anyio.run(scenario)
    finally:
        release.set()
        holder.join(5)
    # The lock wait's own DEADLINE ("nothing was written"), not the gate's, well before the lock's 10 s.
    assert answer.startswith("DEADLINE 等待锁") and "没有写入任何内容" in answer and took < 3.0


def test_a_call_deadline_is_stamped_on_the_gates_clock_and_ends_a_lock_wait_on_it(tmp_path):
    import os

    from dsh_memory_mcp.store import locks as locks_module
    from tests.helpers.clock import FakeClock
    from tests.helpers.lock_markers import marker, plant

    clock = FakeClock()  # time passes only as the lock waiter polls: its 3 s go by at once
    locks = LockManager(str(tmp_path / ".locks"), timeout=10.0, poll=0.5, clock=clock)
    # Held by a live process on this host (our parent): waited for, never broken.
    plant(Path(locks.lock_path("global")), marker(os.getppid()))

    async def scenario() -> tuple[float | None, float | None, float, str, float]:
        async with ToolGate(limit=1, deadline_secs=3.0, clock=clock).running() as gate:
            seen: dict[str, float | None] = {}

            async def body(deadline: float | None) -> str:
                seen["given"], seen["context"] = deadline, locks_module.current_call_deadline()

                def wait_for_lock() -> str:
                    with locks.hold("global"):
                        return "got it"

                return await anyio.to_thread.run_sync(wait_for_lock)

            start, t0 = clock.monotonic(), time.monotonic()
            try:
                answer = await gate.run(body)
            except CallRefused as exc:
                answer = exc.code
            return seen["given"], seen["context"], start, answer, time.monotonic() - t0

    given, context, start, answer, took = anyio.run(scenario)
    assert given == context == start + 3.0
    assert answer == "DEADLINE" and clock.monotonic() >= start + 3.0  # the wait ran to the deadline …
    # … on the gate's clock (not its own 10 s): sooner than 3 real seconds could have passed.
    assert clock.monotonic() < start + 3.5 and took < 3.0
