"""A real `python -m dsh_memory_mcp` over stdio, driven by the official MCP client.

`StdioSession` runs the async client in a blocking portal (a background event loop thread), so
sync tests — hypothesis ones included — can make many calls over one long-lived session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.conftest import subprocess_env


def server_params(
    store_dir: Path | str, *, project: Path | str | None = None, cwd: Path | str | None = None, **env: str
) -> StdioServerParameters:
    args = ["-m", "dsh_memory_mcp", "--store-dir", str(store_dir)]
    if project is not None:
        args += ["--project", str(project)]
    return StdioServerParameters(
        command=sys.executable, args=args, env=subprocess_env(**env), cwd=str(cwd) if cwd else os.getcwd()
    )


class StdioSession:
    """One initialised client session to a spawned server; call tools synchronously."""

    def __init__(self, portal: BlockingPortal, session: ClientSession, init: Any) -> None:
        self.portal = portal
        self.session = session
        self.init = init

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        return self.portal.call(self.session.call_tool, name, arguments or {})

    def list_tools(self) -> Any:
        return self.portal.call(self.session.list_tools)


@contextmanager
def stdio_session(params: StdioServerParameters, errlog: Path, **session_kwargs: Any) -> Iterator[StdioSession]:
    """Spawn the server, initialise, yield a session; the child is reaped when the block ends.

    `session_kwargs` go to `ClientSession` (e.g. `list_roots_callback=`, `client_info=`).

    The client's context managers must be entered and left in one task (anyio cancel scopes), so
    one long-lived task in the portal owns them and waits for the block to end.
    """
    with errlog.open("w", encoding="utf-8") as err, start_blocking_portal() as portal:
        stop = portal.call(anyio.Event)

        async def owner(*, task_status: Any) -> None:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write, **session_kwargs) as session,
            ):
                init = await session.initialize()
                task_status.started((session, init))
                await stop.wait()

        future, (session, init) = portal.start_task(owner)
        try:
            yield StdioSession(portal, session, init)
        finally:
            portal.call(stop.set)
            future.result(timeout=30)
