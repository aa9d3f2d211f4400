"""The only module that speaks MCP: wires `service.schemas.TOOL_SPECS` into the SDK's `MCPServer`.

The SDK derives a tool's input schema and validation from a Python signature; a wrong value
(topK 0, content 42) would then come back as a generic pydantic message with no code. We need
the spec's codes for every bad argument, so each tool is registered with our own hand-written
JSON schema and an argument model that accepts any JSON object, and validation happens in the
tools layer (`MemoryService.call`), which never raises.
"""

from __future__ import annotations

import contextvars
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    GetPromptRequestParams,
    GetPromptResult,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListRootsRequest,
    ListRootsResult,
    NotificationParams,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)
from pydantic import ConfigDict

from dsh_memory_mcp import __version__, config
from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.service import digest, feed
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.render import ToolResult
from dsh_memory_mcp.service.schemas import TOOL_SPECS, ToolSpec
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.transports.stdio_guard import guarded_stdio

__all__ = ["INSTRUCTIONS", "build_server", "refresh_digests", "serve"]

log = logging.getLogger("dsh_memory_mcp.transports.mcp_server")

#: The usage guidance alone (what `initialize` says with `DSH_MEMORY_DIGEST=off` or an empty digest).
INSTRUCTIONS = digest.USAGE

#: The CallContext of the tool call running in this task / worker thread (anyio copies context
#: variables into `to_thread.run_sync`, where the SDK runs our sync tools).
_CALL: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar("dsh_call_context", default=None)

#: How long a `roots/list` request to the client may take before we fall back to the working directory.
ROOTS_TIMEOUT = 5.0


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
        return _to_result(service.call(spec.name, arguments, _CALL.get()))

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


def root_dir(uri: str) -> str | None:
    """The directory of a `file://` root URI (percent-decoded), or None for any other scheme.

    `file:///home/a/app` → `/home/a/app`; `file:///C:/work/app` → `C:/work/app`;
    `file://server/share/app` → `//server/share/app` (UNC).
    """
    parts = urlsplit(uri)
    if parts.scheme.lower() != "file":
        return None
    path = unquote(parts.path)
    if parts.netloc and parts.netloc.lower() != "localhost":
        path = f"//{parts.netloc}{path}"
    elif len(path) >= 3 and path[0] == "/" and path[2] == ":" and path[1].isalpha():
        path = path[1:]  # /C:/x → C:/x
    return path or None


def first_file_root(roots: list[Any]) -> str | None:
    """The rule for several roots: the first `file://` root in the client's order is the project.

    Hosts list the workspace folder they were opened on first; the others stay reachable through
    `path` / `project:<dir>`. Roots of other schemes are skipped.
    """
    for root in roots:
        found = root_dir(str(root.uri))
        if found:
            return found
    return None


def client_name(params: Any) -> str | None:
    """`name/version` from the client's `initialize` params (`clientInfo`), or None."""
    info = getattr(params, "client_info", None)
    if info is None:
        return None
    name = str(getattr(info, "name", "") or "").strip()
    version = str(getattr(info, "version", "") or "").strip()
    if not name:
        return None
    return f"{name}/{version}" if version else name


@dataclass
class _Session:
    """What one SDK session (one stdio connection, one Streamable HTTP session) told us."""

    client: str | None = None
    roots: bool = False  # the client declared the roots capability
    roots_dir: str | None = None  # the project its roots named, once asked
    stale: bool = True  # roots not asked yet, or changed since (notifications/roots/list_changed)
    lock: anyio.Lock = field(default_factory=anyio.Lock)


def _connection_of(ctx: ServerRequestContext[Any, Any]) -> Any:
    # The SDK builds a new ServerSession per request; the Connection under it is per session (one
    # per stdio client, one per Streamable HTTP session), so per-session state is keyed on it.
    session = ctx.session
    return getattr(session, "_connection", session)


class _MemoryServer(MCPServer[Any]):
    """`MCPServer` with per-session call contexts, a memory digest in `instructions`, and the
    spec's `UNKNOWN_TOOL` code for unknown tools.

    Each tool call runs with a `CallContext` built from its session: the project from
    `--project`/`DSH_MEMORY_PROJECT` (or whatever `base_context` says, e.g. a relay header), else
    the client's first `file://` root when it declares `roots`, else the working directory; the
    client is its `clientInfo` `name/version`.
    """

    def __init__(
        self,
        service: MemoryService,
        *,
        base_context: Callable[[ServerRequestContext[Any, Any]], CallContext] | None = None,
        digest_on: bool | None = None,
        digest_cache: digest.DigestCache | None = None,
    ) -> None:
        super().__init__(
            name="dsh-memory-mcp",
            title="DSH Memory",
            version=__version__,
            instructions=INSTRUCTIONS,
            tools=[_tool(spec, service) for spec in TOOL_SPECS],
            log_level="WARNING",
        )
        self._service = service
        self._base = base_context or (lambda _ctx: service.default_context)
        self._digest_on = config.digest_enabled() if digest_on is None else digest_on
        self._sessions: weakref.WeakKeyDictionary[Any, _Session] = weakref.WeakKeyDictionary()
        self._digest_cache = digest_cache
        #: The digest keys (project scope key or None) `initialize` used: refreshed at exit.
        self.digest_projects: set[str | None] = set()
        low = self._lowlevel_server
        low.add_notification_handler("notifications/initialized", NotificationParams, self._on_initialized)
        low.add_notification_handler("notifications/roots/list_changed", NotificationParams, self._on_roots_changed)
        low.middleware.append(self._initialize_middleware)
        # Prompts and resources render with the session's CallContext, so they replace the SDK's
        # static managers' handlers (the capabilities stay advertised).
        low.add_request_handler("prompts/list", PaginatedRequestParams, self._list_prompts)
        low.add_request_handler("prompts/get", GetPromptRequestParams, self._get_prompt)
        low.add_request_handler("resources/list", PaginatedRequestParams, self._list_resources)
        low.add_request_handler("resources/templates/list", PaginatedRequestParams, self._list_templates)
        low.add_request_handler("resources/read", ReadResourceRequestParams, self._read_resource)

    # -- sessions ----------------------------------------------------------------------------------

    def _session(self, ctx: ServerRequestContext[Any, Any]) -> _Session:
        key = _connection_of(ctx)
        state = self._sessions.get(key)
        if state is None:
            params = ctx.session.client_params
            caps = ctx.session.client_capabilities
            state = _Session(client=client_name(params), roots=caps is not None and caps.roots is not None)
            self._sessions[key] = state
        return state

    async def _refresh_roots(self, ctx: ServerRequestContext[Any, Any], state: _Session) -> None:
        async with state.lock:
            if not state.stale:
                return
            state.stale = False
            try:
                with anyio.fail_after(ROOTS_TIMEOUT):
                    result = await ctx.session.send_request(ListRootsRequest(), ListRootsResult)
            except Exception as exc:  # a client that declares roots but cannot answer: keep the fallback
                fallback = self._service.settings.project_dir
                log.info("roots/list 失败(%s: %s),当前项目沿用 %s", type(exc).__name__, exc, fallback)
                return
            found = first_file_root(list(result.roots))
            if found != state.roots_dir:
                state.roots_dir = found
                if found:
                    log.info("project = %s(来源:客户端 roots,%s)", found, state.client or "未知客户端")
                else:
                    log.info("客户端 roots 里没有 file:// 目录,当前项目沿用工作目录")

    async def call_context(self, ctx: ServerRequestContext[Any, Any]) -> CallContext:
        """The CallContext for one request of this session (asks the client for roots when due)."""
        base = self._base(ctx)
        state = self._session(ctx)
        call = base.with_client(state.client) if state.client else base
        if base.project_source != "cwd" or not state.roots:
            return call
        if state.stale or state.lock.locked():  # due, or being fetched (after initialized): wait for it
            await self._refresh_roots(ctx, state)
        if state.roots_dir:
            return call.with_project(state.roots_dir, "roots")
        return call

    async def _on_initialized(self, ctx: ServerRequestContext[Any, Any], params: Any) -> None:
        state = self._session(ctx)
        if state.roots and self._base(ctx).project_source == "cwd":
            await self._refresh_roots(ctx, state)

    async def _on_roots_changed(self, ctx: ServerRequestContext[Any, Any], params: Any) -> None:
        state = self._session(ctx)
        state.stale = True  # first, before any await: the next call re-reads the roots
        await self._refresh_roots(ctx, state)

    # -- initialize: the digest ----------------------------------------------------------------------

    def instructions_for(self, ctx: CallContext, *, roots_pending: bool = False) -> str:
        """Usage guidance + the digest of global and the current project.

        Roots arrive only after `initialize`; when they will decide the project (`roots_pending`),
        the digest holds global memories only rather than guess the workspace from the cwd.
        """
        if not self._digest_on:
            return INSTRUCTIONS
        project = None if roots_pending else ctx.project
        self.digest_projects.add(project)
        try:
            if self._digest_cache is not None:
                text = self._digest_cache.get(self._service.store, project, self._service.clock())
            else:
                text = digest.digest_text(self._service.store, project, self._service.clock())
        except Exception:
            log.warning("记忆摘要生成失败,instructions 只含用法说明", exc_info=True)
            text = ""
        return digest.instructions(text)

    async def _initialize_middleware(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> HandlerResult:
        result: HandlerResult = await call_next(ctx)
        if ctx.method != "initialize" or not isinstance(result, dict) or "instructions" not in result:
            return result
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        caps = params.get("capabilities")
        base = self._base(ctx)
        pending = isinstance(caps, Mapping) and caps.get("roots") is not None and base.project_source == "cwd"
        t0 = time.perf_counter()
        # Inline: the read loop is parked during initialize anyway, and a thread hop costs cold start.
        result["instructions"] = self.instructions_for(base, roots_pending=pending)
        log.debug("instructions: 摘要用时 %.1f ms", (time.perf_counter() - t0) * 1000)
        return result

    # -- prompts and resources -------------------------------------------------------------------

    async def _list_prompts(self, ctx: ServerRequestContext[Any, Any], params: Any) -> ListPromptsResult:
        return ListPromptsResult(
            prompts=[
                Prompt(
                    name=p.name,
                    title=p.title,
                    description=p.description,
                    arguments=[PromptArgument(name=p.argument, description=p.argument_description, required=True)],
                )
                for p in feed.PROMPTS
            ]
        )

    async def _get_prompt(self, ctx: ServerRequestContext[Any, Any], params: GetPromptRequestParams) -> GetPromptResult:
        call = await self.call_context(ctx)
        arguments = {k: str(v) for k, v in (params.arguments or {}).items()}
        try:
            description, text = await anyio.to_thread.run_sync(
                lambda: feed.get_prompt(self._service, params.name, arguments, call)
            )
        except feed.FeedError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"{exc.code}:{exc.message}") from None
        return GetPromptResult(
            description=description,
            messages=[PromptMessage(role="user", content=TextContent(type="text", text=text))],
        )

    async def _list_resources(self, ctx: ServerRequestContext[Any, Any], params: Any) -> ListResourcesResult:
        call = await self.call_context(ctx)
        cursor = getattr(params, "cursor", None)
        try:
            items, next_cursor = await anyio.to_thread.run_sync(
                lambda: feed.list_resources(call, self._service, cursor)
            )
        except feed.FeedError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"{exc.code}:{exc.message}") from None
        return ListResourcesResult(
            resources=[
                Resource(uri=i.uri, name=i.name, title=i.title, description=i.description, mime_type="text/plain")
                for i in items
            ],
            next_cursor=next_cursor,
        )

    async def _list_templates(self, ctx: ServerRequestContext[Any, Any], params: Any) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(
            resource_templates=[
                ResourceTemplate(uri_template=uri, name=name, description=description, mime_type="text/plain")
                for uri, name, description in feed.TEMPLATES
            ]
        )

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        call = await self.call_context(ctx)
        uri = str(params.uri)
        try:
            text = await anyio.to_thread.run_sync(lambda: feed.read_resource(self._service, uri, call))
        except feed.FeedError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"{exc.code}:{exc.message}", data={"uri": uri}) from None
        return ReadResourceResult(contents=[TextResourceContents(uri=uri, mime_type="text/plain", text=text)])

    # -- tools -------------------------------------------------------------------------------------

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            request = context.request_context if context is not None else None
        except (AttributeError, ValueError, LookupError):  # in-process use without a request
            request = None
        call = await self.call_context(request) if request is not None else None
        token = _CALL.set(call)
        try:
            if self._tool_manager.get_tool(name) is None:
                return _to_result(self._service.call(name, arguments, call))
            return await super().call_tool(name, arguments, context)
        finally:
            _CALL.reset(token)


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


def build_server(
    service: MemoryService,
    *,
    base_context: Callable[[ServerRequestContext[Any, Any]], CallContext] | None = None,
    digest_on: bool | None = None,
    digest_cache: digest.DigestCache | None = None,
) -> MCPServer[Any]:
    """An `MCPServer` exposing the tools of `service` (usable in-process by tests).

    :param base_context: the CallContext a request starts from (default: the service's, i.e.
        `--project` / `DSH_MEMORY_PROJECT` / cwd). An HTTP front door can derive it from the
        request (`ctx.request` is the Starlette request there). Roots apply only when its
        `project_source` is "cwd".
    :param digest_on: the memory digest in `instructions` (default: `DSH_MEMORY_DIGEST` not off).
    :param digest_cache: where digests are kept between starts (`serve` uses the user state dir);
        None computes every time. Call `refresh_digests(server)` at exit to keep it warm.
    """
    return _MemoryServer(service, base_context=base_context, digest_on=digest_on, digest_cache=digest_cache)


def refresh_digests(server: MCPServer[Any]) -> None:
    """At exit: recompute the digests this server handed out, so the next start finds them valid.

    Runs after the service's writes and touches are flushed; never raises (exit must not fail).
    """
    if not isinstance(server, _MemoryServer) or server._digest_cache is None or not server._digest_on:
        return
    for project in server.digest_projects:
        try:
            server._digest_cache.refresh(server._service.store, project, server._service.clock())
        except Exception as exc:
            log.debug("digest cache refresh failed: %s", exc)


def serve(settings: Settings) -> None:
    """Serve MCP over stdin/stdout until stdin closes.

    :raises StoreError: the store directory is unusable (the CLI turns it into a diagnostic).
    """
    service = open_service(settings)
    server: MCPServer[Any] | None = None
    try:
        server = build_server(service, digest_cache=digest.DigestCache(digest.default_cache_dir(), settings.store_dir))
        log.info("已启动 dsh-memory-mcp v%s(stdio)", __version__)
        if service.vectors is not None:
            service.vectors.start()
        anyio.run(_run_stdio, server)
    finally:
        try:
            if server is not None:
                service.store.flush()  # our touches first: the refreshed digest keys on the final files
                refresh_digests(server)
        except Exception as exc:
            log.debug("digest refresh at exit skipped: %s", exc)
        finally:
            close_service(service)
