"""`ToolGate` on its own: a real anyio loop, bodies that really sleep (no SDK, no HTTP)."""

from __future__ import annotations

import time

import anyio
import pytest

from dsh_memory_mcp.errors import CallRefused
from dsh_memory_mcp.store.locks import LockManager
from dsh_memory_mcp.transports.gate import ToolGate


def test_a_call_queued_past_its_deadline_is_busy_and_a_long_call_answers_deadline_but_keeps_its_slot():
    events: list[tuple[str, float]] = []

    async def scenario() -> dict[str, object]:
        out: dict[str, object] = {}
        async with ToolGate(limit=1, deadline_secs=0.5).running() as gate:
            t0 = time.monotonic()

            async def long_body(deadline: float | None) -> str:
                await anyio.sleep(1.2)  # runs past its deadline; cannot be interrupted
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
                await anyio.sleep(0.1)
                tg.start_soon(call, "queued", quick_body)
                await anyio.sleep(0.7)
                out["running_after_deadline"] = gate.running_calls
                tg.start_soon(call, "after", quick_body)
            out["running_at_end"] = gate.running_calls
        return out

    out = anyio.run(scenario)
    when = dict(events)
    # DEADLINE comes at the deadline (0.5 s) plus the short grace a body gets to answer for itself.
    assert out["long"] == "DEADLINE" and 0.9 < when["long answered"] < 1.2 + 0.3
    assert out["queued"] == "BUSY" and 0.5 < when["queued answered"] < 1.0
    assert out["running_after_deadline"] == 1  # the overrunning body still holds its slot
    # The third call waited for that slot (freed at 1.2 s) and ran.
    assert out["after"] == "quick" and when["after answered"] >= when["long finished"]
    assert out["running_at_end"] == 0


def test_draining_refuses_new_calls_and_waits_for_running_ones():
    async def scenario() -> tuple[object, bool, float]:
        async with ToolGate(limit=4, deadline_secs=0).running() as gate:

            async def body(deadline: float | None) -> str:
                assert deadline is None  # 0 = no deadline
                await anyio.sleep(0.4)
                return "done"

            result: dict[str, object] = {}

            async def call() -> None:
                result["value"] = await gate.run(body)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await anyio.sleep(0.05)
                t0 = time.monotonic()
                drained = await gate.drain(5.0)
                waited = time.monotonic() - t0
            with pytest.raises(CallRefused) as refused:
                await gate.run(body)
            assert refused.value.code == "BUSY"
            return result["value"], drained, waited

    value, drained, waited = anyio.run(scenario)
    assert value == "done" and drained is True and 0.2 < waited < 2.0


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
                return exc.code, time.monotonic() - t0
            return "no error", time.monotonic() - t0

    try:
        code, took = anyio.run(scenario)
    finally:
        release.set()
        holder.join(5)
    assert code == "DEADLINE" and took < 3.0
