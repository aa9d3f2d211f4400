"""The only module that speaks MCP: wires `service.schemas.TOOL_SPECS` into the SDK's `MCPServer`.

The SDK derives a tool's input schema and validation from a Python signature; a wrong value
(topK 0, content 42) would then come back as a generic pydantic message with no code. We need
the spec's codes for every bad argument, so each tool is registered with our own hand-written
JSON schema and an argument model that accepts any JSON object, and validation happens in the
tools layer (`MemoryService.call`), which never raises.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ConfigDict

from dsh_memory_mcp import __version__
from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.service.render import ToolResult
from dsh_memory_mcp.service.schemas import TOOL_SPECS, ToolSpec
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.transports.stdio_guard import guarded_stdio

__all__ = ["INSTRUCTIONS", "build_server", "serve"]

log = logging.getLogger("dsh_memory_mcp.transports.mcp_server")

INSTRUCTIONS = (
    "dsh-memory-mcp is the user's long-term memory, shared by every IDE and agent they use. "
    "Before answering questions about the user's preferences, conventions, projects or past decisions, "
    "call memory_search (Chinese or English keywords). When the user states something durable — a "
    "preference, a decision, a convention, a procedure, a fact about their setup — save it with memory_save "
    "as one self-contained sentence. Use memory_get with 8-char ids for full text; memory_forget removes "
    "outdated memories (or pass supersedes when saving the replacement)."
)


class _AnyArguments(ArgModelBase):
    """Accepts any JSON object and hands it on unchanged: validation is the tools layer's job."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _to_result(result: ToolResult) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=result.text)],
        structured_content=result.structured,
        is_error=result.is_error,
    )


def _tool(spec: ToolSpec, service: MemoryService) -> Tool:
    def run(**arguments: Any) -> CallToolResult:
        return _to_result(service.call(spec.name, arguments))

    run.__name__ = spec.name
    return Tool(
        fn=run,
        name=spec.name,
        title=spec.title,
        description=spec.description,
        parameters=spec.input_schema,
        fn_metadata=FuncMetadata(arg_model=_AnyArguments, output_schema=spec.output_schema),
        is_async=False,  # sync: the SDK runs it in a worker thread, so a lock wait never blocks the loop
        context_kwarg=None,
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
    )


class _MemoryServer(MCPServer[Any]):
    """`MCPServer` whose unknown-tool answer carries the spec's `UNKNOWN_TOOL` code."""

    def __init__(self, service: MemoryService) -> None:
        super().__init__(
            name="dsh-memory-mcp",
            title="DSH Memory",
            version=__version__,
            instructions=INSTRUCTIONS,
            tools=[_tool(spec, service) for spec in TOOL_SPECS],
            log_level="WARNING",
        )
        self._service = service

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if self._tool_manager.get_tool(name) is None:
            return _to_result(self._service.call(name, arguments))
        return await super().call_tool(name, arguments, context)


#: How long requests already received may still run after stdin closes.
DRAIN_SECONDS = 30.0


async def _run_stdio(server: MCPServer[Any]) -> None:
    """Serve stdio; at end of input, answer every request already received before returning.

    A host (or `echo '…' | dsh-memory-mcp`) may close stdin right after its last request. The
    SDK's loop ends at end of input and cancels requests still in flight, so a save could be
    acknowledged by nobody. We sit between the transport and the loop: requests are counted in,
    responses counted out, and the loop's input is closed only when nothing is pending (or after
    `DRAIN_SECONDS`).
    """
    from mcp.shared._context_streams import create_context_streams
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

    pending: set[Any] = set()
    # Our transport, not the SDK's stdio_server: every input line gets an answer (stdio_guard).
    async with guarded_stdio() as (read, write):
        in_send, in_recv = create_context_streams[SessionMessage | Exception](0)
        out_send, out_recv = create_context_streams[SessionMessage](0)

        async def pump_in() -> None:
            async with in_send:
                async for item in read:
                    if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                        pending.add(item.message.id)
                    await in_send.send(item)
                with anyio.move_on_after(DRAIN_SECONDS):
                    while pending:
                        await anyio.sleep(0.01)

        async def pump_out() -> None:
            # Closing `write` at the end lets the transport's stdout writer finish.
            async with out_recv, write:
                async for item in out_recv:
                    await write.send(item)
                    if isinstance(item.message, (JSONRPCResponse, JSONRPCError)):
                        pending.discard(item.message.id)

        lowlevel = server._lowlevel_server
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_in)
            tg.start_soon(pump_out)
            await lowlevel.run(in_recv, out_send, lowlevel.create_initialization_options())
            await out_send.aclose()


def build_server(service: MemoryService) -> MCPServer[Any]:
    """An `MCPServer` exposing the five tools of `service` (usable in-process by tests)."""
    return _MemoryServer(service)


def serve(settings: Settings) -> None:
    """Serve MCP over stdin/stdout until stdin closes.

    :raises StoreError: the store directory is unusable (the CLI turns it into a diagnostic).
    """
    service = open_service(settings)
    try:
        server = build_server(service)
        log.info("已启动 dsh-memory-mcp v%s(stdio)", __version__)
        if service.vectors is not None:
            service.vectors.start()
        anyio.run(_run_stdio, server)
    finally:
        close_service(service)
