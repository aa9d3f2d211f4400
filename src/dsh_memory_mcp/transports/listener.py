"""`serve`'s connections (docs/design.md: serve's edge): a subclass of uvicorn's h11 protocol
(`Edge.protocol_class()`) plus one periodic sweep; `Edge.snapshot()` is `/health`'s ``connections``.
uvicorn bounds only a kept-alive connection's idle time: a client sending half a header would hold
its descriptor forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from dsh_memory_mcp.transports.access import authenticated, peer_label

log = logging.getLogger("dsh_memory_mcp.transports.listener")

#: The connection cap when the fd limit leaves room for it.
DEFAULT_MAX_CONNECTIONS = 1024
#: How often the sweep looks at every connection's deadlines.
_TICK_SECS = 0.25
_TIMEOUT_ANSWER = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: 16\r\n\r\nrequest timeout\n"
)


@dataclass(frozen=True)
class EdgeLimits:
    """How much one connection may take, and how many there may be."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    #: connections that have not shown the token, per peer (`access.peer_label`)
    per_client: int = 256
    header_secs: float = 10.0
    body_secs: float = 30.0
    min_body_rate: float = 1024.0

    @property
    def backlog(self) -> int:
        """The listen queue, which is also how many connections asyncio accepts in one go: small
        enough that one burst cannot run past the fd reserve before the cap closes anything."""
        return max(16, min(128, self.max_connections // 8))


def connection_budget(requested: int | None = None) -> int:
    """The connection cap: `requested` (default `DEFAULT_MAX_CONNECTIONS`), but never more than the
    soft RLIMIT_NOFILE minus a reserve (a quarter, at least 64) for the files serve itself opens."""
    wanted = DEFAULT_MAX_CONNECTIONS if requested is None else requested
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # Windows: no RLIMIT_NOFILE
        return max(1, wanted)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return max(1, wanted)
    reserve = max(64, soft // 4)
    return max(1, min(wanted, soft - reserve))


def bind(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A listening TCP socket (created with ``IPPROTO_TCP``, so asyncio sets ``TCP_NODELAY`` on
    what it accepts; an accepted socket inherits the listener's protocol number)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    if sys.platform != "win32":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class Edge:
    """Every open connection of one `serve`: phases, trust, the caps, the counters, the sweep; on the
    event loop's thread (`snapshot` only reads)."""

    def __init__(self, limits: EdgeLimits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.clock = clock
        #: open connections, oldest first (dict order)
        self.conns: dict[EdgeProtocol, None] = {}
        #: peer → its connections that have not shown the token, oldest first
        self.strangers: dict[str, dict[EdgeProtocol, None]] = {}
        #: (ip, port) of each open connection, as uvicorn puts it in the ASGI scope
        self.by_client: dict[tuple[str, int], EdgeProtocol] = {}
        self.counts = {"accepted": 0, "headerTimeout": 0, "bodyTimeout": 0, "evicted": 0, "refused": 0}
        self._sweeping: asyncio.TimerHandle | None = None

    # -- what the app tells us -----------------------------------------------------------------

    def vouch(self, scope: Any) -> None:
        """The request in `scope` carried the token: its connection is a token holder's from now on."""
        client = scope.get("client")
        conn = self.by_client.get(tuple(client)) if client else None
        if conn is not None and not conn.edge_trusted:
            conn.edge_trusted = True
            self.strangers.get(conn.edge_peer, {}).pop(conn, None)

    def snapshot(self) -> dict[str, Any]:
        trusted = sum(1 for c in self.conns if c.edge_trusted)
        return {
            "open": len(self.conns),
            "tokenHolders": trusted,
            "limit": self.limits.max_connections,
            "perClient": self.limits.per_client,
            "headerSecs": self.limits.header_secs,
            "bodySecs": self.limits.body_secs,
            **self.counts,
        }

    def protocol_class(self) -> type[EdgeProtocol]:
        """The protocol class to hand uvicorn (`uvicorn.Config(http=…)`), bound to this edge."""
        return type("BoundEdgeProtocol", (EdgeProtocol,), {"edge": self})

    # -- connections come and go ---------------------------------------------------------------

    def admit(self, conn: EdgeProtocol) -> None:
        self.counts["accepted"] += 1
        self.conns[conn] = None
        if conn.client is not None:
            self.by_client[conn.client] = conn
        own = self.strangers.setdefault(conn.edge_peer, {})
        own[conn] = None
        if len(own) > self.limits.per_client:
            self._close(next(c for c in own if c is not conn), "evicted")
        while len(self.conns) > self.limits.max_connections:
            victim = self._victim(conn)
            if victim is None:
                self._close(conn, "refused")
                break
            self._close(victim, "evicted")
        if self._sweeping is None:
            self._sweeping = conn.loop.call_later(_TICK_SECS, self._sweep, conn.loop)

    def forget(self, conn: EdgeProtocol) -> None:
        self.conns.pop(conn, None)
        if conn.client is not None and self.by_client.get(conn.client) is conn:
            del self.by_client[conn.client]
        own = self.strangers.get(conn.edge_peer)
        if own is not None:
            own.pop(conn, None)
            if not own:
                del self.strangers[conn.edge_peer]

    def _victim(self, newcomer: EdgeProtocol) -> EdgeProtocol | None:
        for conn in self.conns:  # oldest first
            if conn is not newcomer and not conn.edge_trusted:
                return conn
        for conn in self.conns:
            if conn is not newcomer and conn.edge_idle():
                return conn
        return None

    def _close(self, conn: EdgeProtocol, why: str) -> None:
        self.counts[why] += 1
        self.forget(conn)
        conn.edge_close(answer=why == "bodyTimeout" or (why == "headerTimeout" and conn.edge_header_started))

    # -- the sweep -----------------------------------------------------------------------------

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sweeping = None
        now = self.clock()
        try:
            for conn in list(self.conns):
                why = conn.edge_overdue(now, _TICK_SECS)
                if why is not None:
                    log.info("连接 %s 超时(%s),已关闭", conn.edge_peer, why)
                    self._close(conn, why)
        finally:
            if self.conns and not loop.is_closed():
                self._sweeping = loop.call_later(_TICK_SECS, self._sweep, loop)


class EdgeProtocol(H11Protocol):
    """uvicorn's h11 protocol with the edge's bookkeeping (phases for the timeouts, trust, NODELAY).
    Hooks uvicorn 0.54's `H11Protocol` callbacks and its `cycle`, `conn`, `flow` attributes (the
    slow-connection tests of `serve` fail if those change)."""

    edge: Edge  # set by `Edge.protocol_class`

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.edge_trusted = False
        self.edge_peer = "unknown"
        #: when the header of the request being read started to be awaited (None: not reading one)
        self.edge_header_since: float | None = None
        #: bytes of the request being awaited have arrived (a silent connection gets no 408: a
        #: browser's preconnected socket would read it as the answer to its next request)
        self.edge_header_started = False
        #: the body being read: when it started, bytes so far, the last byte's time
        self.edge_body_since = 0.0
        self.edge_body_bytes = 0
        self.edge_last_byte = 0.0

    # -- uvicorn's callbacks -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, AttributeError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.edge_peer = peer_label(self.client)
        self.edge_header_since = self.edge.clock()
        self.edge.admit(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.edge.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        now = self.edge.clock()
        if self.conn.their_state is h11.IDLE:
            if self.edge_header_since is None:
                self.edge_header_since = now  # the first byte of a request on a kept-alive connection
            self.edge_header_started = True
        elif self.conn.their_state is h11.SEND_BODY:
            self.edge_body_bytes += len(data)
            self.edge_last_byte = now
        before = self.cycle
        super().data_received(data)
        if self.cycle is not before:  # a request's header was complete
            self.edge_header_since = None
            self.edge_header_started = False
            self.edge_body_since = self.edge_last_byte = now
            self.edge_body_bytes = 0

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE:
            # Waiting for the next request: uvicorn's keep-alive timeout covers the idle time, our
            # header timeout starts with its first byte (`data_received`).
            self.edge_header_since = None

    # -- what the edge asks --------------------------------------------------------------------

    def edge_idle(self) -> bool:
        """Between requests (nothing being read or answered)."""
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def edge_overdue(self, now: float, tick: float) -> str | None:
        """Why this connection is past a deadline (``headerTimeout``/``bodyTimeout``), or None."""
        limits = self.edge.limits
        state = self.conn.their_state
        if state is h11.IDLE:
            since = self.edge_header_since
            return "headerTimeout" if since is not None and now - since > limits.header_secs else None
        if state is not h11.SEND_BODY or self.transport.is_closing():
            return None
        cycle = self.cycle
        if self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue):
            # serve is not reading: the client is not late. Move its clocks with ours.
            self.edge_last_byte = now
            self.edge_body_since += tick
            return None
        if now - self.edge_last_byte > limits.body_secs:
            return "bodyTimeout"
        took = now - self.edge_body_since
        if took > limits.body_secs and self.edge_body_bytes < limits.min_body_rate * took:
            return "bodyTimeout"
        return None

    def edge_close(self, *, answer: bool) -> None:
        """Close now; with `answer`, a request that got no answer yet gets a 408 first."""
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if (
            answer
            and (cycle is None or not cycle.response_started)
            and self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE)
        ):
            with contextlib.suppress(Exception):
                self.transport.write(_TIMEOUT_ANSWER)
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's receive() sees http.disconnect, its sends go nowhere
            cycle.message_event.set()
        if self.transport.get_write_buffer_size() > (1 << 16):
            self.transport.abort()
        else:
            self.transport.close()


class Vouch:
    """ASGI middleware, after authentication: a request that carried the token vouches for its
    connection (`Edge.vouch`)."""

    def __init__(self, app: ASGIApp, edge: Edge) -> None:
        self.app = app
        self.edge = edge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[_EDGE_KEY] = self.edge  # for `vouch` from a route with its own credential (the page)
            if authenticated(scope):
                self.edge.vouch(scope)
        await self.app(scope, receive, send)


_EDGE_KEY = "dsh_memory_mcp.edge"


def vouch(scope: Scope) -> None:
    """A route that checked a credential of its own (the web page's) vouches for the connection of
    the request in `scope`, as a bearer token does; nothing when serve's edge is not in front."""
    edge = scope.get(_EDGE_KEY)
    if isinstance(edge, Edge):
        edge.vouch(scope)
