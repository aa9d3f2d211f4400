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


@contextmanager
def memory_session(
    store_dir: Path | str, *, project: Path | str | None = None, env: dict[str, str] | None = None, **client_kwargs: Any
) -> Iterator[StdioSession]:
    """The same server (`MemoryServer` over the composed service) behind the SDK's in-memory client:
    for tests of what the tools answer, where a child process adds nothing but start-up time.
    `env` are settings variables (DSH_MEMORY_*); `client_kwargs` go to `mcp.Client`.
    """
    from mcp import Client

    from dsh_memory_mcp import config
    from dsh_memory_mcp.service.compose import close_service, open_service
    from dsh_memory_mcp.transports.mcp_server import MemoryServer

    settings = config.resolve_settings(
        store_dir=str(store_dir),
        project_dir=str(project) if project is not None else None,
        cwd=str(project) if project is not None else os.getcwd(),
        env={"DSH_MEMORY_VECTOR": "off", **(env or {})},
    )
    service = open_service(settings)
    try:
        with start_blocking_portal() as portal:
            stop = portal.call(anyio.Event)

            async def owner(*, task_status: Any) -> None:
                async with Client(MemoryServer(service).server, **client_kwargs) as client:
                    task_status.started(client)
                    await stop.wait()

            future, client = portal.start_task(owner)
            try:
                yield StdioSession(portal, client, None)
            finally:
                portal.call(stop.set)
                future.result(timeout=30)
    finally:
        close_service(service)
