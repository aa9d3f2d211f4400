"""The tool gate of `serve`: at most N tool calls run at once, the rest wait in FIFO order, each
with one deadline over queue and run (`DSH_MEMORY_TOOL_DEADLINE_SECS`, 0 = none). A call past its
deadline keeps its slot until it ends: a worker thread cannot be interrupted.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import anyio.abc

from dsh_memory_mcp.errors import CallRefused
from dsh_memory_mcp.store.clock import SYSTEM, Clock
from dsh_memory_mcp.store.locks import call_deadline
from dsh_memory_mcp.texts import msg

T = TypeVar("T")

#: How long after its deadline a running body may still deliver its own answer.
ANSWER_GRACE_SECS = 0.5


class ToolGate:
    """Admission, deadline and drain for tool calls; use inside `running()`.

    :param clock: what deadlines are stamped on; the waits themselves are the event loop's.
    """

    def __init__(self, limit: int, deadline_secs: float, *, clock: Clock = SYSTEM) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self.deadline_secs = deadline_secs
        self.clock = clock
        self._slots = anyio.Semaphore(limit)
        self._tg: anyio.abc.TaskGroup | None = None
        self.running_calls = 0
        self.queued_calls = 0
        self.closing = False

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ToolGate]:
        """Own the task group that call bodies run in (so a body past its deadline outlives its request)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield self
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    async def run(self, body: Callable[[float | None], Awaitable[T]]) -> T:
        """Run `body(deadline)` under the gate; `deadline` is a monotonic time on `clock`, or None.

        :raises CallRefused: ``BUSY`` (never started: queue past the deadline, or the server is
            stopping) or ``DEADLINE`` (started, still running at the deadline).
        """
        if self.closing or self._tg is None:
            raise CallRefused(msg("服务正在退出,这次调用没有执行。请稍后重连后重试。"), code="BUSY")
        deadline = self.clock.monotonic() + self.deadline_secs if self.deadline_secs > 0 else math.inf
        self.queued_calls += 1
        try:
            with anyio.move_on_after(deadline - self.clock.monotonic()) as waiting:
                await self._slots.acquire()
            if waiting.cancelled_caught:
                raise CallRefused(
                    msg(
                        "服务器繁忙:{limit} 个工具调用正在运行,这次调用排队 {deadline_secs} 秒仍未开始,"
                        "没有执行任何操作。请稍后重试。",
                        limit=self.limit,
                        deadline_secs=f"{self.deadline_secs:g}",
                    ),
                    code="BUSY",
                )
        finally:
            self.queued_calls -= 1
        if self.closing:
            self._slots.release()
            raise CallRefused(msg("服务正在退出,这次调用没有执行。请稍后重连后重试。"), code="BUSY")
        self.running_calls += 1
        done = anyio.Event()
        outcome: dict[str, Any] = {}
        wire_deadline = None if math.isinf(deadline) else deadline

        async def call() -> None:
            try:
                with call_deadline(wire_deadline):
                    outcome["value"] = await body(wire_deadline)
            except Exception as exc:  # handed to the waiting request, if it still waits
                outcome["error"] = exc
            finally:
                self.running_calls -= 1
                self._slots.release()
                done.set()

        tg = self._tg
        assert tg is not None
        tg.start_soon(call)
        # A lock wait inside the body ends at the deadline itself (with its own, more precise
        # DEADLINE: "nothing was written"); give that answer a moment to come back first.
        with anyio.move_on_after(deadline - self.clock.monotonic() + ANSWER_GRACE_SECS):
            await done.wait()
        if not done.is_set():
            raise CallRefused(
                msg(
                    "这次调用运行超过了截止时间({deadline_secs} 秒)还没有结束,先返回错误;它仍在后台运行,"
                    "写入可能稍后才完成。重试前先用 memory_search / memory_list 确认结果。",
                    deadline_secs=f"{self.deadline_secs:g}",
                ),
                code="DEADLINE",
            )
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]  # type: ignore[no-any-return]

    async def drain(self, seconds: float) -> bool:
        """Stop admitting calls; wait up to `seconds` for running ones. True when none is left."""
        self.closing = True
        end = self.clock.monotonic() + seconds
        while self.running_calls and self.clock.monotonic() < end:
            await anyio.sleep(0.02)
        return self.running_calls == 0
