"""The MCP server: `service.schemas.TOOL_SPECS`, prompts and resources on the SDK's lowlevel
`Server`, for both protocol eras (docs/design.md: Protocol eras). Tools are called with the arguments
as sent: `MemoryService.call` validates, so a bad value gets the spec's code.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

import anyio
import mcp.types as types
from mcp.server.caching import CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from dsh_memory_mcp import __version__, config
from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.service import digest, feed
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.render import ToolResult
from dsh_memory_mcp.service.schemas import TOOL_SPECS, ToolSpec
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.texts import msg
from dsh_memory_mcp.transports.stdio_guard import guarded_stdio

log = logging.getLogger("dsh_memory_mcp.transports.mcp_server")
T = TypeVar("T")
P = TypeVar("P")

#: The usage guidance alone (what `instructions` say with `DSH_MEMORY_DIGEST=off` or an empty digest).
INSTRUCTIONS = digest.USAGE

#: The longest a call waits for the client's roots (handshake era: the `roots/list` answer; 2026-07-28:
#: the retry that carries it) before the working directory stands in.
ROOTS_TIMEOUT = 1.0
#: 2026-07-28: how long a client's roots answer stands before the next call that needs the project
#: asks again (the revision has no roots-changed notification).
ROOTS_VALID_SECS = 60.0
#: The tool `_meta` key by which Claude Code keeps a tool loaded instead of behind its tool search.
ALWAYS_LOAD = "anthropic/alwaysLoad"
#: The key of our roots request in an `input_required` result's `inputRequests`.
ROOTS_REQUEST_KEY = "dsh-memory-mcp/roots"
#: 2026-07-28 clients remembered at once (HTTP keys come and go with connections).
MAX_MODERN_CLIENTS = 1024

#: Client-side cache hints for 2026-07-28 results: fixed lists for 10 minutes; whatever shows
#: memories (resources, `server/discover` with the digest) is stale at once.
CACHE_HINTS: dict[Any, CacheHint] = {
    "tools/list": CacheHint(ttl_ms=600_000, scope="private"),
    "prompts/list": CacheHint(ttl_ms=600_000, scope="private"),
    "resources/templates/list": CacheHint(ttl_ms=600_000, scope="private"),
    "resources/list": CacheHint(ttl_ms=0, scope="private"),
    "resources/read": CacheHint(ttl_ms=0, scope="private"),
    "server/discover": CacheHint(ttl_ms=0, scope="private"),
}


# ----------------------------------------------------------------------------------------------
# Pure helpers


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
    """The first `file://` root in the client's order (hosts list the folder they were opened on
    first; the others stay reachable through `path` / `project:<dir>`)."""
    for root in roots:
        found = root_dir(str(root.uri))
        if found:
            return found
    return None


def client_name(params: Any) -> str | None:
    """`name/version` from the client's `clientInfo` (`initialize` params or the request envelope)."""
    info = getattr(params, "client_info", None)
    if info is None:
        return None
    name = str(getattr(info, "name", "") or "").strip()
    version = str(getattr(info, "version", "") or "").strip()
    if not name:
        return None
    return f"{name}/{version}" if version else name


def _lenient_client_info(params: Any) -> None:
    """A `clientInfo` without the required `version` (several clients leave it out) gets an empty one
    instead of failing the request with -32602."""
    if not isinstance(params, dict):
        return
    meta = params.get("_meta")
    for holder, key in ((params, "clientInfo"), (meta, "io.modelcontextprotocol/clientInfo")):
        info = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(info, dict) and isinstance(info.get("name"), str) and "version" not in info:
            info["version"] = ""


def to_result(result: ToolResult) -> types.CallToolResult:
    # A plain str: pydantic re-encodes a str subclass (`texts.Text`) and refuses a lone surrogate in it.
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=str(result.text))],
        structured_content=result.structured,
        is_error=result.is_error,
    )


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema,
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=False,
        ),
        _meta={ALWAYS_LOAD: True} if spec.always_load else None,
    )


def _is_modern(ctx: ServerRequestContext[Any, Any]) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def _is_http(ctx: ServerRequestContext[Any, Any]) -> bool:
    # The SDK's HTTP entries attach the Starlette request; stdio and in-process clients have none.
    return ctx.request is not None and hasattr(ctx.request, "headers")


# ----------------------------------------------------------------------------------------------
# What one client told us


@dataclass
class _Client:
    """One handshake-era session (a stdio connection, a Streamable HTTP session), or one 2026-07-28
    client (this process's stdio peer, or an HTTP client on one connection)."""

    client: str | None = None
    roots: bool = False  # the client declared the roots capability
    roots_dir: str | None = None  # the project its roots named, once answered
    #: handshake era: roots not asked yet, or changed since (`notifications/roots/list_changed`)
    stale: bool = True
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    #: 2026-07-28: a roots answer stands for later requests (stdio), or only its own (HTTP)
    keep_roots: bool = True
    #: 2026-07-28: when the roots answer came (valid for ROOTS_VALID_SECS), when we asked and had
    #: no answer yet, and until when a client that did not answer keeps the working directory.
    answered_at: float | None = None
    asked_at: float | None = None
    fallback_until: float = 0.0


class _Clients:
    """Per-client state. Handshake era: keyed on the connection's `initialize` params object
    (`sdk_private`), gone with it. 2026-07-28: this process's stdio peer, or over HTTP the TCP peer,
    client info and relay project — which pooled clients may share, so such an entry does not keep
    roots answers (`keep_roots` off: one client's project must never become another's); at most
    `MAX_MODERN_CLIENTS`, least recently used first out."""

    def __init__(self) -> None:
        self._by_connection: dict[int, _Client] = {}
        self._modern: OrderedDict[tuple[Any, ...], _Client] = OrderedDict()

    def get(self, ctx: ServerRequestContext[Any, Any]) -> _Client:
        session = ctx.session
        caps = session.client_capabilities
        declared = caps is not None and caps.roots is not None
        if not _is_modern(ctx):
            params = session.client_params
            if params is None:  # before initialize: nothing to remember yet
                return _Client(roots=declared)
            key = id(params)
            state = self._by_connection.get(key)
            if state is None:
                state = _Client(client=client_name(params), roots=declared)
                self._by_connection[key] = state
                weakref.finalize(params, self._by_connection.pop, key, None)
            return state
        name = client_name(session.client_params)
        if _is_http(ctx):
            request = ctx.request
            peer = getattr(request, "client", None)
            headers = request.headers  # type: ignore[union-attr]
            mkey: tuple[Any, ...] = ("http", tuple(peer) if peer else None, name, headers.get("x-dsh-project"))
        else:
            mkey = ("local", name)
        state = self._modern.get(mkey)
        if state is None:
            state = _Client(client=name, roots=declared, keep_roots=mkey[0] == "local")
            self._modern[mkey] = state
            while len(self._modern) > MAX_MODERN_CLIENTS:
                self._modern.popitem(last=False)
        else:
            self._modern.move_to_end(mkey)
            state.roots = declared
        return state


# ----------------------------------------------------------------------------------------------
# The server


class MemoryServer:
    """The lowlevel `Server` (`self.server`) wired to one `MemoryService`. A request's project: the
    one `base_context` gives, else (its `project_source` "cwd") the client's first `file://` root
    when it declares `roots`, else the working directory; its client: `clientInfo` `name/version`.

    :param base_context: the CallContext a request starts from (default: the service's).
    :param digest_cache: where digests are kept between starts (`refresh_digests` at exit).
    """

    def __init__(
        self,
        service: MemoryService,
        *,
        base_context: Callable[[ServerRequestContext[Any, Any]], CallContext] | None = None,
        digest_cache: digest.DigestCache | None = None,
    ) -> None:
        self.service = service
        self._base = base_context or (lambda _ctx: service.default_context)
        self.digest_on = bool(config.read("DSH_MEMORY_DIGEST"))  # the memory digest in `instructions`
        self.digest_cache = digest_cache
        #: The digest keys (project scope key or None) handed out: refreshed at exit.
        self.digest_projects: set[str | None] = set()
        self._clients = _Clients()
        self._told: set[str] = set()
        self._tools = [_tool(spec) for spec in TOOL_SPECS]
        self._input_schemas = {spec.name: dict(spec.input_schema) for spec in TOOL_SPECS}
        self.server: Server[Any] = Server(
            "dsh-memory-mcp",
            version=__version__,
            title="DSH Memory",
            instructions=INSTRUCTIONS,
            cache_hints=CACHE_HINTS,
            get_tool_input_schema=self._input_schemas.get,
            on_list_tools=self._list_tools,
            on_call_tool=self._asking(self._call_tool),
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._asking(self._get_prompt),
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._asking(self._read_resource),
        )
        self.server.add_notification_handler(
            "notifications/roots/list_changed", types.NotificationParams, self._on_roots_changed
        )
        self.server.middleware.append(self._instructions_middleware)

    # -- the project from the client's roots ----------------------------------------------------

    def _roots_unanswered(self, state: _Client, why: str) -> None:
        who = state.client or msg("未知客户端")
        fallback = self.service.settings.project_dir
        if who not in self._told:
            self._told.add(who)
            log.warning("客户端 %s 声明了 roots 却没有给出(%s),当前项目沿用工作目录 %s", who, why, fallback)
        else:
            log.debug("roots of %s not answered (%s)", who, why)

    def _roots_answered(self, state: _Client, roots: list[Any]) -> str | None:
        found = first_file_root(roots)
        if found != state.roots_dir:
            state.roots_dir = found
            if found:
                log.info("project = %s(来源:客户端 roots,%s)", found, state.client or "未知客户端")
            else:
                log.info("客户端 roots 里没有 file:// 目录,当前项目沿用工作目录")
        return found

    async def _ask_roots(self, ctx: ServerRequestContext[Any, Any], state: _Client, budget: float) -> None:
        """Handshake era: one `roots/list` to the client, at most `budget` seconds, on the request's own
        stream when there is one (over HTTP a standalone GET stream may not be open)."""
        async with state.lock:
            if not state.stale:
                return
            state.stale = False
            related = ServerMessageMetadata(related_request_id=ctx.request_id) if ctx.request_id is not None else None
            try:
                with anyio.fail_after(max(0.0, budget)):
                    result = await ctx.session.send_request(
                        types.ListRootsRequest(), types.ListRootsResult, metadata=related
                    )
            except TimeoutError:
                self._roots_unanswered(state, msg("{budget} 秒内没有回答 roots/list", budget=f"{budget:g}"))
                return
            except Exception as exc:
                self._roots_unanswered(state, msg("roots/list 失败:{name}", name=type(exc).__name__))
                return
            self._roots_answered(state, list(result.roots))

    def _modern_roots(self, state: _Client, params: Any, *, can_ask: bool) -> types.InputRequiredResult | str | None:
        """2026-07-28: the project named by the roots in this request's `inputResponses`, or the
        client's kept answer while valid (stdio), or — when this request can carry it — the
        `input_required` result asking for them. None: the fallback project."""
        now = time.monotonic()
        responses = getattr(params, "input_responses", None) or {}
        if ROOTS_REQUEST_KEY in responses:
            answer = responses[ROOTS_REQUEST_KEY]
            state.asked_at = None
            if isinstance(answer, types.ListRootsResult):
                state.answered_at = now
                return self._roots_answered(state, list(answer.roots))
            state.fallback_until = now + ROOTS_VALID_SECS
            self._roots_unanswered(state, msg("回答的不是 roots/list 的结果"))
            return None
        if state.keep_roots and state.answered_at is not None and now - state.answered_at < ROOTS_VALID_SECS:
            return state.roots_dir
        if now < state.fallback_until or not can_ask:
            return None
        # Asked, and the client came back without the answer (over HTTP, where the key may be
        # shared: not within `ROOTS_TIMEOUT`): it refused; the fallback stands for a while.
        if state.asked_at is not None and (state.keep_roots or now - state.asked_at > ROOTS_TIMEOUT):
            state.asked_at = None
            state.fallback_until = now + ROOTS_VALID_SECS
            self._roots_unanswered(state, msg("没有带着 roots 重试"))
            return None
        if state.asked_at is None:
            state.asked_at = now
        return types.InputRequiredResult(input_requests={ROOTS_REQUEST_KEY: types.ListRootsRequest()})

    async def call_context(
        self, ctx: ServerRequestContext[Any, Any], params: Any = None, *, can_ask: bool = False
    ) -> CallContext | types.InputRequiredResult:
        """The CallContext of one request (asking the client for its roots when due), or — for a
        2026-07-28 request that can carry one (`can_ask`) — the `input_required` result asking."""
        base = self._base(ctx)
        state = self._clients.get(ctx)
        call = base.with_client(state.client) if state.client else base
        if base.project_source != "cwd" or not state.roots:
            return call
        if _is_modern(ctx):
            found = self._modern_roots(state, params, can_ask=can_ask)
            if isinstance(found, types.InputRequiredResult):
                return found
        else:
            if state.stale or state.lock.locked():  # due, or being fetched by another call: wait for it
                remaining = call.remaining()
                budget = ROOTS_TIMEOUT if remaining is None else min(ROOTS_TIMEOUT, remaining)
                await self._ask_roots(ctx, state, budget)
            found = state.roots_dir
        return call.with_project(found, "roots") if found else call

    def _asking(
        self, answer: Callable[[P, CallContext], Awaitable[T]]
    ) -> Callable[[ServerRequestContext[Any, Any], P], Awaitable[T | types.InputRequiredResult]]:
        """The handler of a request that needs the project: `answer(params, call)`, or — when a
        2026-07-28 client's roots are due — the `input_required` result asking for them."""

        async def handler(ctx: ServerRequestContext[Any, Any], params: P) -> T | types.InputRequiredResult:
            call = await self.call_context(ctx, params, can_ask=True)
            if isinstance(call, types.InputRequiredResult):
                return call
            return await answer(params, call)

        return handler

    async def _list_context(self, ctx: ServerRequestContext[Any, Any]) -> CallContext:
        """The CallContext of a request that cannot answer `input_required` (a list)."""
        call = await self.call_context(ctx)
        assert isinstance(call, CallContext)
        return call

    async def _on_roots_changed(self, ctx: ServerRequestContext[Any, Any], params: Any) -> None:
        self._clients.get(ctx).stale = True  # the next call that needs the project asks again

    # -- instructions: the digest ----------------------------------------------------------------

    def instructions_for(self, ctx: CallContext, *, roots_pending: bool = False) -> str:
        """Usage guidance + the digest of global and the current project (global only while the
        client's roots, which will decide the project, are pending)."""
        if not self.digest_on:
            return INSTRUCTIONS
        project = None if roots_pending else ctx.project
        self.digest_projects.add(project)
        try:
            if self.digest_cache is not None:
                text = self.digest_cache.get(self.service.store, project, self.service.clock())
            else:
                text = digest.digest_text(self.service.store, project, self.service.clock())
        except Exception:
            log.warning("记忆摘要生成失败,instructions 只含用法说明", exc_info=True)
            text = ""
        return digest.instructions(text)

    async def _instructions_middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        _lenient_client_info(ctx.params)
        result: HandlerResult = await call_next(ctx)
        if ctx.method not in ("initialize", "server/discover"):
            return result
        if not isinstance(result, dict) or "instructions" not in result:
            return result
        base = self._base(ctx)
        if ctx.method == "initialize":
            params = ctx.params if isinstance(ctx.params, Mapping) else {}
            caps = params.get("capabilities")
            declared = isinstance(caps, Mapping) and caps.get("roots") is not None
            call, pending = base, declared and base.project_source == "cwd"
        else:
            call = await self._list_context(ctx)
            declared = self._clients.get(ctx).roots
            pending = declared and call.project_source == "cwd" and base.project_source == "cwd"
        t0 = time.perf_counter()
        if _is_http(ctx):  # one event loop serves every session: the parse must not stall it
            text = await anyio.to_thread.run_sync(lambda: self.instructions_for(call, roots_pending=pending))
        else:  # stdio: the read loop waits for this answer anyway, and a thread hop costs cold start
            text = self.instructions_for(call, roots_pending=pending)
        result["instructions"] = text
        log.debug("instructions: 摘要用时 %.1f ms", (time.perf_counter() - t0) * 1000)
        return result

    # -- tools -----------------------------------------------------------------------------------

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self._tools)

    async def _call_tool(self, params: types.CallToolRequestParams, call: CallContext) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        # Sync tools run in a worker thread, so a lock wait never blocks the event loop.
        result = await anyio.to_thread.run_sync(self.service.call, params.name, arguments, call)
        return to_result(result)

    # -- prompts and resources -------------------------------------------------------------------

    async def _list_prompts(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=p.name,
                    title=p.title,
                    description=p.description,
                    arguments=[
                        types.PromptArgument(name=p.argument, description=p.argument_description, required=True)
                    ],
                )
                for p in feed.PROMPTS
            ]
        )

    async def _get_prompt(self, params: types.GetPromptRequestParams, call: CallContext) -> types.GetPromptResult:
        arguments = {k: str(v) for k, v in (params.arguments or {}).items()}
        description, text = await _feed(lambda: feed.get_prompt(self.service, params.name, arguments, call))
        return types.GetPromptResult(
            description=description,
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=str(text)))],
        )

    async def _list_resources(self, ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListResourcesResult:
        call = await self._list_context(ctx)
        cursor = getattr(params, "cursor", None)
        items, next_cursor = await _feed(lambda: feed.list_resources(call, self.service, cursor))
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=i.uri, name=i.name, title=i.title, description=i.description, mime_type="text/plain")
                for i in items
            ],
            next_cursor=next_cursor,
        )

    async def _list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: Any
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(uri_template=uri, name=name, description=description, mime_type="text/plain")
                for uri, name, description in feed.TEMPLATES
            ]
        )

    async def _read_resource(
        self, params: types.ReadResourceRequestParams, call: CallContext
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        text = await _feed(lambda: feed.read_resource(self.service, uri, call), {"uri": uri})
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/plain", text=str(text))]
        )


async def _feed(run: Callable[[], T], data: Any = None) -> T:
    """`run()` in a worker thread; a `feed.FeedError` becomes an INVALID_PARAMS error (with `data`)."""
    try:
        return await anyio.to_thread.run_sync(run)
    except feed.FeedError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=f"{exc.code}:{exc.message}", data=data) from None


async def _run_stdio(server: Server[Any]) -> None:
    """Serve stdio until stdin ends and the requests already received are answered (`guarded_stdio`)."""
    async with guarded_stdio() as (read, write):
        await server.run(read, write, server.create_initialization_options())
        await write.aclose()


def refresh_digests(server: MemoryServer) -> None:
    """At exit, after the store is flushed: recompute the digests this server handed out, so the next
    start finds them valid. Never raises."""
    if server.digest_cache is None or not server.digest_on:
        return
    for project in server.digest_projects:
        try:
            server.digest_cache.refresh(server.service.store, project, server.service.clock())
        except Exception as exc:
            log.debug("digest cache refresh failed: %s", exc)


def serve(settings: Settings) -> None:
    """Serve MCP over stdin/stdout until stdin closes.

    :raises StoreError: the store directory is unusable.
    """
    service = open_service(settings, warm="default")  # the first search's scopes read in the background
    memory: MemoryServer | None = None
    try:
        memory = MemoryServer(service, digest_cache=digest.DigestCache(digest.default_cache_dir(), settings.store_dir))
        log.info("已启动 dsh-memory-mcp v%s(stdio)", __version__)
        if service.vectors is not None:
            service.vectors.start()
        anyio.run(_run_stdio, memory.server)
    finally:
        try:
            if memory is not None:
                service.store.flush()  # our touches first: the refreshed digest keys on the final files
                refresh_digests(memory)
        except Exception as exc:
            log.debug("digest refresh at exit skipped: %s", exc)
        finally:
            close_service(service)
