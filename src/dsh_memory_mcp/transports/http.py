"""`dsh-memory-mcp serve`: the MCP server over Streamable HTTP at `/mcp`, one `MemoryService` shared
by every session (docs/design.md: Shared server, relay and their trust rules). Protocol, Host/Origin
(421/403) and bearer checks are the SDK's; on SIGINT/SIGTERM running calls get up to `DRAIN_SECS`,
then every session ends, `serve.json` is removed, exit 0.
"""

from __future__ import annotations

import contextvars
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from types import FrameType
from typing import Any

import anyio
import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.types.version import LATEST_MODERN_VERSION
from sse_starlette.sse import AppStatus
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dsh_memory_mcp import __version__
from dsh_memory_mcp.config import LOOPBACK_HOSTS, ServeSettings, Settings
from dsh_memory_mcp.errors import CallRefused
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.render import error_result
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.store.locks import current_call_deadline
from dsh_memory_mcp.texts import Text, msg
from dsh_memory_mcp.transports import access, call_facts, listener, serve_file
from dsh_memory_mcp.transports import relay_wire as wire
from dsh_memory_mcp.transports.gate import ToolGate
from dsh_memory_mcp.transports.mcp_server import MemoryServer, to_result
from dsh_memory_mcp.transports.sdk_private import SessionLifecycle

log = logging.getLogger("dsh_memory_mcp.transports.http")

#: How long running tool calls may still finish after SIGINT/SIGTERM.
DRAIN_SECS = 10.0
#: Request bodies above this are answered 413 before anything parses them (a memory is a sentence).
MAX_BODY_BYTES = 1 << 20


@dataclass(frozen=True)
class PageChecks:
    """What `serve` gives the routes it mounts next to `/mcp` (the web page): the SDK's own Host/Origin
    and bearer checks, configured exactly as for `/mcp`, so a mounted page never re-implements them."""

    security: TransportSecurityMiddleware
    settings: ServeSettings
    #: The page's one-time login codes; `serve` prints the first one's link at start.
    login_codes: access.LoginCodes


#: Extra routes next to `/mcp` (the web page): `factory(service, token, checks=PageChecks) -> routes`.
RouteFactory = Callable[..., Sequence[BaseRoute]]


class ServeRefused(Exception):
    """`serve` must not start; `code` is the exit code (1 another serve owns the store, 2 unsafe bind)."""

    def __init__(self, lines: Sequence[str], code: int) -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = list(lines)
        self.code = code


# ----------------------------------------------------------------------------------------------
# Auth and Host/Origin rules


class _StaticToken:
    """The SDK's `TokenVerifier` for one shared secret (constant-time comparison)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode("utf-8")

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode("utf-8", "surrogateescape"), self._token):
            return AccessToken(token="", client_id="dsh-memory-mcp", scopes=[])
        return None


def _bracket(host: str) -> str:
    """An IPv6 literal as a Host header spells it (`::1` → `[::1]`)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _host_items(item: str) -> list[str]:
    """A `DSH_MEMORY_ALLOWED_HOSTS` entry → the SDK's allowed-host patterns (bare host: any port)."""
    item = item.strip().lower()
    if item.startswith("[") and "]" in item:
        host, _, rest = item.partition("]")
        host += "]"
        port = rest[1:] if rest.startswith(":") else ""
    elif item.count(":") == 1:
        host, _, port = item.partition(":")
    else:
        host, port = _bracket(item), ""
    return [f"{host}:{port}"] if port else [host, f"{host}:*"]


def _own_port(name: str, port: int) -> list[str]:
    """Host header values that name `name` on `port` (a Host without a port means port 80)."""
    return [f"{name}:{port}", name] if port == 80 else [f"{name}:{port}"]


def _wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "[::]", "")


def local_host(bind_host: str) -> str:
    """The name a local client uses to reach `bind_host` (a wildcard bind is reached via 127.0.0.1)."""
    host = bind_host.strip().lower()
    return "127.0.0.1" if _wildcard(host) else _bracket(host)


def security_settings(settings: ServeSettings, port: int, *, user_token: bool) -> TransportSecuritySettings:
    """The Host/Origin allow-lists for `/mcp`: loopback names on serve's own port only (another port
    is something else listening there); the bound address and `DSH_MEMORY_ALLOWED_HOSTS` only with a
    user-set token (without one, the Host check is what stops a rebinding page posing as a local
    client); origins: ours on our port and `DSH_MEMORY_ALLOWED_ORIGINS`."""
    hosts: list[str] = []
    for name in ("127.0.0.1", "localhost", "[::1]"):
        hosts += _own_port(name, port)
    origins = [f"http://{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")]
    bound = settings.host.strip().lower()
    if user_token:
        if not _wildcard(bound) and bound not in LOOPBACK_HOSTS:
            hosts += _own_port(_bracket(bound), port)
            origins.append(f"http://{_bracket(bound)}:{port}")
        for item in settings.allowed_hosts:
            hosts += _host_items(item)
    origins += list(settings.allowed_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(dict.fromkeys(hosts)),
        allowed_origins=list(dict.fromkeys(origins)),
    )


# ----------------------------------------------------------------------------------------------
# Sessions: the SDK's manager, plus the never-initialized rule and an orderly end for all


class _Sessions(SessionLifecycle):
    """The SDK's session manager, plus when each session was born, whether it finished the handshake
    (`reap_uninitialized`), and its requests in flight (counted by `_SessionRoom`), so that at the cap
    `make_room` can end the session idle the longest and `end_all` can end every one at shutdown
    (open GET streams would otherwise hold uvicorn's drain)."""

    def __init__(self, *args: Any, init_grace: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.init_grace = init_grace
        self._born: dict[str, tuple[float, StreamableHTTPServerTransport]] = {}
        self._initialized: set[str] = set()
        #: session id → [requests in flight (the opening one included), when the last one ended]
        self._activity: dict[str, list[float]] = {}
        self.ended_for_room = 0
        #: requests that may open a session, let through by `_SessionRoom` and not yet admitted
        self.opening = 0
        self.room = anyio.Lock()

    def session_started(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self._born[session_id] = (time.monotonic(), transport)
        self.opening = max(0, self.opening - 1)
        transport.is_json_response_enabled = _ANSWER_JSON.get()

    def session_ended(self, session_id: str) -> None:
        self._born.pop(session_id, None)
        self._initialized.discard(session_id)
        self._activity.pop(session_id, None)

    @property
    def full(self) -> bool:
        """No room for one more session (those being opened counted)."""
        return self.max_sessions is not None and len(self._born) + self.opening >= self.max_sessions

    def request_started(self, session_id: str) -> None:
        """A request of `session_id` is being served (the one that opened it, from its answer on)."""
        if session_id in self._born:
            self._activity.setdefault(session_id, [0.0, time.monotonic()])[0] += 1

    def request_ended(self, session_id: str) -> None:
        entry = self._activity.get(session_id)
        if entry is not None:
            entry[0] = max(0.0, entry[0] - 1)
            entry[1] = time.monotonic()

    async def make_room(self) -> bool:
        """End the session idle the longest (one that never finished its handshake and has been idle
        for a second goes first); False when none is idle."""
        now = time.monotonic()
        idle = [
            (sid in self._initialized or now - ended < 1.0, ended, sid)
            for sid, (running, ended) in self._activity.items()
            if not running
        ]
        if not idle:
            return False
        _, _, sid = min(idle)
        log.info("会话数已达上限 %s,结束空闲最久的会话 %s…", self.max_sessions, sid[:8])
        self.ended_for_room += 1
        await self.end_session(sid, self._born[sid][1])  # `_activity` holds only sessions in `_born`
        return True

    @property
    def count(self) -> int:
        return len(self._born)

    def mark_initialized(self, session_id: str) -> None:
        if session_id in self._born:
            self._initialized.add(session_id)

    async def reap_uninitialized(self) -> int:
        now = time.monotonic()
        late = [
            (sid, transport)
            for sid, (born, transport) in list(self._born.items())
            if sid not in self._initialized and now - born > self.init_grace
        ]
        for sid, transport in late:
            log.info("会话 %s… 创建后 %g 秒仍未完成握手,已结束", sid[:8], self.init_grace)
            await self.end_session(sid, transport)
        return len(late)

    async def end_all(self) -> None:
        for sid, (_, transport) in list(self._born.items()):
            await self.end_session(sid, transport)


#: How the session being opened in this context answers its POSTs: one JSON body (True) or an SSE
#: stream (False, the SDK's default); set by `_SessionRoom`, read by `_Sessions.session_started`.
_ANSWER_JSON: contextvars.ContextVar[bool] = contextvars.ContextVar("dsh_answer_json", default=False)


class _ClosedSessionNoise(logging.Filter):
    """Drops the SDK's "Error handling POST request" / "SSE response error" traceback when the
    session had already closed (a client that opened one and left at once), also when the SDK's
    task group wraps that error in an exception group."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        closed = (anyio.ClosedResourceError, anyio.BrokenResourceError)
        if isinstance(exc, BaseExceptionGroup):
            matched, rest = exc.split(closed)
            return matched is None or rest is not None  # kept unless every error in it is the closed session
        return not isinstance(exc, closed)


_SDK_HTTP_LOG = logging.getLogger("mcp.server.streamable_http")
if not any(isinstance(f, _ClosedSessionNoise) for f in _SDK_HTTP_LOG.filters):
    _SDK_HTTP_LOG.addFilter(_ClosedSessionNoise())


def _once(send: Send) -> Send:
    """`send` that drops whatever follows a completed response: a session closed at once can make the
    SDK answer a POST twice (a traceback for a reply nobody reads)."""
    done = False

    async def guarded(message: Message) -> None:
        nonlocal done
        if done:
            return
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            done = True
        await send(message)

    return guarded


def answers_json(body: bytes | None, headers: dict[bytes, bytes], *, roots_matter: bool) -> bool:
    """Whether the handshake-era session that `body` (its `initialize`) opens answers each POST with
    one JSON body instead of an SSE stream (docs/design.md: Answer form): yes unless the client
    declares `roots` and they can decide the project (no explicit project for serve or in the
    relay's header). A body that is not a readable `initialize` keeps the SDK's default (SSE)."""
    message = _json_body(body)
    params = message.get("params") if isinstance(message, dict) else None
    if not isinstance(params, dict) or message.get("method") != "initialize":
        return False
    caps = params.get("capabilities")
    if not isinstance(caps, dict) or caps.get("roots") is None or not roots_matter:
        return True
    project = headers.get(call_facts.PROJECT_HEADER_BYTES)
    source = headers.get(call_facts.PROJECT_SOURCE_HEADER.lower().encode("ascii"), b"").strip().lower()
    return project is not None and source != b"cwd"


def _json_body(body: bytes | None) -> Any:
    """The JSON value of a request body held whole (None: not held, or not JSON)."""
    try:
        return None if body is None else json.loads(body)
    except (ValueError, RecursionError):
        return None


async def _held_body(receive: Receive, limit: int) -> tuple[list[Any], bytes | None]:
    """The request's messages read so far, and its whole body when it is at most `limit` bytes
    (None: larger, or the client went away). Pass the messages on with `_replay`."""
    held: list[Any] = []
    size = 0
    while size <= limit:
        message = await receive()
        held.append(message)
        if message["type"] != "http.request":
            return held, None
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            if size > limit:
                return held, None
            body = b"".join(m.get("body", b"") for m in held)
            return [{"type": "http.request", "body": body, "more_body": False}], body
    return held, None


def _replay(held: list[Any], receive: Receive) -> Receive:
    async def replay() -> Any:
        if held:
            return held.pop(0)
        return await receive()

    return replay


class _SessionRoom:
    """In front of the SDK's manager: refuses (400) an `X-DSH-Project` that is not an absolute path,
    counts each session's requests in flight, makes room at the cap before a request that would open
    a session, and chooses how that session answers. A session-less POST's body is read at most to
    `MAX_BODY_BYTES` (beyond that the SDK's own 413 answers it)."""

    def __init__(self, app: ASGIApp, sessions: _Sessions, *, roots_matter: bool) -> None:
        self.app = app
        self.sessions = sessions
        self.roots_matter = roots_matter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = next((v for k, v in scope["headers"] if k == call_facts.PROJECT_HEADER_BYTES), None)
        if raw is not None and call_facts.decode_project(raw.decode("latin-1")) is None:
            body = f"{call_facts.PROJECT_HEADER} 必须是百分号编码的绝对路径".encode()
            await Response(body, status_code=400, media_type="text/plain; charset=utf-8")(scope, receive, send)
            return
        try:
            await self._dispatch(scope, receive, _once(send))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            # The session was closed under the request (its client gone): nobody is left to answer.
            log.debug("request of a closed session dropped: %s", type(exc).__name__)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        sid_raw = headers.get(MCP_SESSION_ID_HEADER.encode("latin-1"))
        version = headers.get(_VERSION_HEADER_BYTES)
        if sid_raw is not None:
            sid = sid_raw.decode("latin-1")
            self.sessions.request_started(sid)
            try:
                await self.app(scope, receive, send)
            finally:
                self.sessions.request_ended(sid)
            return
        legacy = version is None or version.decode("latin-1") in wire.HANDSHAKE_VERSIONS
        if not legacy or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        held, body = await _held_body(receive, MAX_BODY_BYTES)
        receive = _replay(held, receive)
        extra = modern_routing_headers(_json_body(body)) if version is None else None
        if extra:  # a 2026-07-28 message without its routing headers (`modern_routing_headers`)
            scope = dict(scope, headers=[*scope["headers"], *extra])
            if extra[0][1].decode("ascii") not in wire.HANDSHAKE_VERSIONS:
                await self.app(scope, receive, send)
                return
        _ANSWER_JSON.set(answers_json(body, headers, roots_matter=self.roots_matter))
        sessions = self.sessions
        async with sessions.room:  # room is made and taken by one opening at a time
            while sessions.full and await sessions.make_room():
                pass
            sessions.opening += 1
        opened: list[str] = []

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers", ()):
                    if key.lower() == b"mcp-session-id":
                        opened.append(value.decode("latin-1"))
                        self.sessions.request_started(opened[-1])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if not opened:  # not admitted (refused, or not an opening request after all)
                sessions.opening = max(0, sessions.opening - 1)
            for sid in opened:
                sessions.request_ended(sid)


# ----------------------------------------------------------------------------------------------
# The per-message middleware: handshake bookkeeping, relay project header, the tool gate


def _base_context(service: MemoryService) -> Callable[[ServerRequestContext[Any, Any]], CallContext]:
    """A request's starting CallContext: the process default, the relay's `X-DSH-Project`, and the
    tool gate's deadline for this call."""

    def base(ctx: ServerRequestContext[Any, Any]) -> CallContext:
        call = service.default_context
        request = ctx.request if isinstance(ctx.request, Request) else None
        raw = request.headers.get(call_facts.PROJECT_HEADER) if request is not None else None
        project = call_facts.decode_project(raw) if raw is not None else None
        if request is not None and project is not None:
            # A relay's own --project / DSH_MEMORY_PROJECT is explicit and wins over the host's roots;
            # a relay that only knew its working directory leaves roots the last word, like a direct server.
            relayed = (request.headers.get(call_facts.PROJECT_SOURCE_HEADER) or "").strip().lower()
            call = call.with_project(project, "cwd" if relayed == "cwd" else "relay")
        deadline = current_call_deadline()  # the tool gate's, set around the call (`ToolGate.run`)
        if deadline is not None:
            call = replace(call, deadline=deadline)
        return call

    return base


class _CallMiddleware:
    """SDK server middleware (`Server.middleware`): runs for every inbound message."""

    def __init__(self, gate: ToolGate, sessions: _Sessions) -> None:
        self.gate = gate
        self.sessions = sessions

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        request = ctx.request if isinstance(ctx.request, Request) else None
        if ctx.method == "notifications/initialized" and request is not None:
            sid = request.headers.get(MCP_SESSION_ID_HEADER)
            if sid:
                self.sessions.mark_initialized(sid)
        if ctx.method != "tools/call":
            return await call_next(ctx)

        async def body(_deadline: float | None) -> HandlerResult:
            return await call_next(ctx)

        try:
            return await self.gate.run(body)
        except CallRefused as exc:
            return to_result(error_result(exc.code, exc.message))


# ----------------------------------------------------------------------------------------------
# The app


@dataclass
class _State:
    sessions: _Sessions
    gate: ToolGate
    started_at: int
    edge: listener.Edge


_VERSION_HEADER_BYTES = wire.PROTOCOL_HEADER.lower().encode("ascii")


def modern_routing_headers(message: Any) -> list[tuple[bytes, bytes]] | None:
    """The routing headers a 2026-07-28 message implies, for a POST that carried none of them (a stdio
    bridge forwarding a host's lines as they are): from the request's `_meta`, or the latest version
    for a notification without a session. None: leave the request alone."""
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    method = message["method"]
    if "id" not in message:
        if method == "notifications/initialized":
            return None  # a handshake-era client's: the SDK's own answer stands
        return [(_VERSION_HEADER_BYTES, LATEST_MODERN_VERSION.encode("ascii"))]
    version = wire.meta(message).get(wire.PROTOCOL_VERSION_META_KEY)
    if method == "initialize" or not isinstance(version, str) or not version.isascii() or not version.isprintable():
        return None
    headers = wire.routing_headers(wire.Message("request", message), version)  # the relay's, checked against the SDK
    return [(name.lower().encode("ascii"), value.encode("ascii")) for name, value in headers.items()]


def build_app(
    service: MemoryService, checks: PageChecks, *, token: str, extra_routes: Sequence[BaseRoute] = ()
) -> tuple[Starlette, _State]:
    """The Starlette app: `/mcp` (bearer + `checks`' Host/Origin + gate), `/health`, then `extra_routes`."""
    settings = checks.settings
    server = MemoryServer(service, base_context=_base_context(service))
    gate = ToolGate(settings.max_tool_calls, settings.tool_deadline_secs)
    sessions = _Sessions(
        app=server.server,
        json_response=False,
        stateless=False,
        security_settings=checks.security.settings,
        session_idle_timeout=settings.session_idle_secs,
        max_request_body_size=MAX_BODY_BYTES,
        max_sessions=settings.max_sessions,
        init_grace=min(settings.session_init_secs, settings.session_idle_secs),
    )
    server.server.middleware.append(_CallMiddleware(gate, sessions))
    state = _State(
        sessions=sessions,
        gate=gate,
        started_at=time.time_ns() // 1_000_000,
        edge=listener.Edge(edge_limits(settings)),
    )

    async def health(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await checks.security.validate_request(request) or JSONResponse(
            {
                "ok": True,
                "name": "dsh-memory-mcp",
                "version": __version__,
                "pid": os.getpid(),
                "startedAt": state.started_at,
                "sessions": sessions.count,
                "sessionLimit": sessions.max_sessions,
                "sessionsEndedForRoom": sessions.ended_for_room,
                "connections": state.edge.snapshot(),
                "toolCalls": {
                    "running": gate.running_calls,
                    "queued": gate.queued_calls,
                    "limit": gate.limit,
                    "deadlineSecs": gate.deadline_secs,  # the relay waits this (+ a grace), never longer
                },
            }
        )
        await response(scope, receive, send)

    # Auth first: the project header is read only from requests that carried the token.
    mcp_app = access.RequireToken(
        _SessionRoom(
            StreamableHTTPASGIApp(sessions),
            sessions,
            roots_matter=service.default_context.project_source == "cwd",
        )
    )
    routes: list[BaseRoute] = [
        Route("/mcp", endpoint=mcp_app),
        Route("/health", endpoint=access.RequireToken(health), methods=["GET"]),
        *access.oauth_routes(),
        *extra_routes,
    ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with sessions.run(), gate.running(), anyio.create_task_group() as tg:
            tg.start_soon(_housekeeping, state)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    app = Starlette(
        debug=False,
        routes=routes,
        # Bodies: `/mcp` is bounded by the SDK's manager (`MAX_BODY_BYTES`, 413); mounted routes bound
        # their own (the web page's import takes larger files than a tool call ever needs).
        middleware=[
            Middleware(AuthenticationMiddleware, backend=access.OwnerBackend(_StaticToken(token))),
            Middleware(listener.Vouch, edge=state.edge),
        ],
        lifespan=lifespan,
    )
    return app, state


async def _housekeeping(state: _State) -> None:
    """Once a second: end sessions that never finished the handshake."""
    while True:
        await anyio.sleep(1.0 if state.sessions.init_grace >= 5 else 0.2)
        try:
            await state.sessions.reap_uninitialized()
        except Exception:  # never let bookkeeping take the server down
            log.exception("会话清理失败")


# ----------------------------------------------------------------------------------------------
# Running it


class _Server(uvicorn.Server):
    """uvicorn, with our drain in front of its shutdown and signals counted for the exit code."""

    def __init__(self, config: uvicorn.Config, state: _State) -> None:
        super().__init__(config)
        self.state = state
        self.signalled = 0
        # sse-starlette would cut every open SSE stream at the signal, dropping the answers of
        # running calls: we end the streams ourselves, after the drain.
        AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.signalled += 1
        if self.signalled == 1:
            log.info("收到退出信号,等待正在运行的工具调用结束(最多 %g 秒)…", DRAIN_SECS)
            _arm_hard_exit(DRAIN_SECS + 5.0)
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # stop accepting first; the drain must not admit new connections
        if not await self.state.gate.drain(DRAIN_SECS):
            log.warning("⚠️ %d 个工具调用 %g 秒后仍未结束,不再等待", self.state.gate.running_calls, DRAIN_SECS)
        await anyio.sleep(0.05)  # let the last answers reach their SSE streams
        AppStatus.should_exit = True
        await self.state.sessions.end_all()
        await super().shutdown(sockets)


def _arm_hard_exit(seconds: float) -> None:
    def hard_exit() -> None:
        sys.stderr.write(f"[dsh-memory-mcp] ⚠️ 收到退出信号 {seconds:g} 秒后仍未停下,强制退出\n")
        sys.stderr.flush()
        os._exit(0)

    timer = threading.Timer(seconds, hard_exit)
    timer.daemon = True
    timer.start()


def edge_limits(settings: ServeSettings) -> listener.EdgeLimits:
    """The connection limits of `settings` (the cap never above what the fd limit allows)."""
    cap = listener.connection_budget(settings.max_connections)
    per_client = settings.client_connections or max(4, cap // 4)
    return listener.EdgeLimits(
        max_connections=cap,
        per_client=per_client,
        header_secs=settings.header_timeout_secs,
        body_secs=settings.body_timeout_secs,
    )


def _other_serve_lines(store_dir: str, other: serve_file.ServeInfo) -> list[Text]:
    answers = serve_file.health(other) is not None
    state = msg("正在应答") if answers else msg("进程还在,但没有应答")
    lines = [
        msg(
            "❌ 启动失败:这个记忆库已经有一个 serve 在运行(pid {pid},{url},{state})",
            pid=other.pid,
            url=other.url,
            state=state,
        ),
        msg(
            "⇒ 记忆库 {store_dir} 同一时间只能有一个 serve;其它宿主直接连 {url} 即可(令牌见 {path})",
            store_dir=store_dir,
            url=other.url,
            path=serve_file.path_for(store_dir),
        ),
        msg("⇒ 要换端口或参数,先停掉它(kill {pid})再启动", pid=other.pid),
    ]
    if not answers:
        lines.append(
            msg(
                "⇒ 若 pid {pid} 已不是 dsh-memory-mcp(进程号被复用),删除 {path} 后重试",
                pid=other.pid,
                path=serve_file.path_for(store_dir),
            )
        )
    return lines


def check_bind(settings: ServeSettings) -> None:
    """:raises ServeRefused: (exit 2) a non-loopback address without a user-set token, or with one
    under `access.MIN_TOKEN_BITS` bits."""
    if not settings.loopback and settings.token is not None:
        weak = access.weak_token_lines(settings.token, settings.host)
        if weak is not None:
            raise ServeRefused(weak, code=2)
    if not settings.loopback and settings.token is None:
        raise ServeRefused(
            [
                msg("❌ 拒绝启动:要监听非回环地址 {host},但没有设置 DSH_MEMORY_TOKEN", host=settings.host),
                msg("⇒ 原因:自动生成的令牌只写在本机的 serve.json 里,别的机器拿不到;不设令牌就对网络开放等于没有门"),
                msg(
                    "⇒ 修复:DSH_MEMORY_TOKEN=<足够长的随机串> dsh-memory-mcp serve --host …(生成:python -c 'import "
                    "secrets; print(secrets.token_urlsafe(32))'),或去掉 --host 只在本机监听"
                ),
            ],
            code=2,
        )


def serve_http(
    settings: Settings,
    serve: ServeSettings,
    *,
    route_factories: Sequence[RouteFactory] = (),
    on_started: Callable[[str], None] | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; returns normally after the drain.

    :raises ServeRefused: unsafe bind (code 2) or another live `serve` owns the store (code 1).
    :raises OSError: the port cannot be bound.
    :raises StoreError: the store directory is unusable.
    """
    check_bind(serve)
    previous = _calm_signals()
    try:
        existing = serve_file.owner(settings.store_dir)
        if existing is not None:
            raise ServeRefused(_other_serve_lines(settings.store_dir, existing), code=1)
        service = open_service(settings, warm="all")  # every scope read in the background from the start
        try:
            _serve_service(settings, serve, service, route_factories, on_started)
        finally:
            close_service(service)
    finally:
        _restore_signals(previous)


def _serve_service(
    settings: Settings,
    serve: ServeSettings,
    service: MemoryService,
    route_factories: Sequence[RouteFactory],
    on_started: Callable[[str], None] | None,
) -> None:
    user_token = serve.token is not None
    token = serve.token or serve.kept_token or secrets.token_urlsafe(32)
    sock = listener.bind(serve.host, serve.port, edge_limits(serve).backlog)
    try:
        port = int(sock.getsockname()[1])
        base = f"http://{local_host(serve.host)}:{port}"
        info = serve_file.ServeInfo(
            url=f"{base}/mcp",
            pid=os.getpid(),
            token=token,
            version=__version__,
            started_at=time.time_ns() // 1_000_000,
        )
        checks = PageChecks(
            TransportSecurityMiddleware(security_settings(serve, port, user_token=user_token)),
            serve,
            access.LoginCodes(service.clock),
        )
        extra: list[BaseRoute] = []
        for factory in route_factories:
            extra.extend(factory(service, token, checks=checks))
        app, state = build_app(service, checks, token=token, extra_routes=extra)
        claimed = serve_file.claim(settings.store_dir, info)
        if not claimed.ok:
            if claimed.other is not None:
                raise ServeRefused(_other_serve_lines(settings.store_dir, claimed.other), code=1)
            raise ServeRefused(
                [msg("❌ 启动失败:无法写入 {path}", path=serve_file.path_for(settings.store_dir))], code=1
            )
        try:
            if claimed.replaced_stale is not None:
                log.info("已替换遗留的 serve.json(pid %d %s)", claimed.replaced_stale.pid, claimed.replaced_why)
            if not user_token and (serve.allowed_hosts or not serve.loopback):
                log.warning("⚠️ DSH_MEMORY_ALLOWED_HOSTS 只在设置了 DSH_MEMORY_TOKEN 时生效,本次只放行回环地址")
            if service.vectors is not None:
                service.vectors.start()
            config = uvicorn.Config(
                app,
                log_config=None,
                log_level="warning",
                access_log=False,
                lifespan="on",
                timeout_graceful_shutdown=3,
                server_header=False,
                # serve is nobody's reverse proxy: uvicorn's default trusts X-Forwarded-For from
                # 127.0.0.1, which would let a loopback client rename the peer a session is bound to.
                proxy_headers=False,
                http=state.edge.protocol_class(),
                backlog=state.edge.limits.backlog,
            )
            server = _Server(config, state)
            if _signals_seen:  # asked to stop while starting up: serve nothing, exit 0
                server.should_exit = True
            log.info("已启动 dsh-memory-mcp v%s(serve,%s)", __version__, info.url)
            log.info(
                "令牌 = %s(DSH_MEMORY_TOKEN)",
                msg("用户设置")
                if user_token
                else msg("自动生成,见 {path}", path=serve_file.path_for(settings.store_dir)),
            )
            log.info(
                "工具调用并发上限 = %d,截止时间 = %s,空闲会话 %g 秒后回收",
                serve.max_tool_calls,
                msg("{secs} 秒", secs=f"{serve.tool_deadline_secs:g}") if serve.tool_deadline_secs > 0 else msg("无"),
                serve.session_idle_secs,
            )
            if on_started is not None and extra:
                # A one-time code, never the token: the browser keeps this URL in its history.
                on_started(f"{base}/#code={checks.login_codes.mint()}")
            server.run(sockets=[sock])  # blocking; uvicorn re-raises a caught signal after it: see _calm_signals
            if server.signalled:
                log.info("收到退出信号,已停止")
        finally:
            serve_file.release(settings.store_dir, info)
    finally:
        sock.close()


#: Stop signals noted by `_calm_signals`' handlers for the `serve_http` running now (emptied at
#: each start, so the signal that ended one serve does not end the next one in this process).
_signals_seen: list[int] = []
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # both exist on every platform, Windows included


def _calm_signals() -> dict[int, Any]:
    """Handlers that only note a signal, around the whole serve: uvicorn re-raises the signal it
    caught after its shutdown, which would otherwise kill us with -15 after our drain."""
    previous: dict[int, Any] = {}
    _signals_seen.clear()
    if threading.current_thread() is not threading.main_thread():
        return previous

    def note(signum: int, frame: FrameType | None) -> None:
        _signals_seen.append(signum)

    for sig in _STOP_SIGNALS:
        try:
            previous[sig] = signal.signal(sig, note)
        except (ValueError, OSError):
            pass
    return previous


def _restore_signals(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError, TypeError):
            pass
