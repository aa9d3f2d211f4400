"""The relay: a stdio MCP server process that forwards its host's messages to a running `serve`,
and falls back to a direct child server when serve fails (docs/design.md: Shared server, relay and
their trust rules). Standard library only (neither the SDK nor numpy: its cold start is a fraction of
a direct one's); what serve sends back is checked by `relay_wire`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO

from dsh_memory_mcp import config
from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.texts import msg
from dsh_memory_mcp.transports import relay_wire as wire
from dsh_memory_mcp.transports import serve_file
from dsh_memory_mcp.transports.call_facts import PROJECT_HEADER, PROJECT_SOURCE_HEADER, encode_project
from dsh_memory_mcp.transports.serve_file import ServeInfo

SESSION_HEADER = "mcp-session-id"
#: How long the start-up probe may take before we decide `serve` is not answering.
PROBE_TIMEOUT = 1.5
#: A request unanswered `LIVENESS_AFTER` s makes the relay check `/health` every `LIVENESS_EVERY` s
#: (each check `LIVENESS_TIMEOUT` s); `LIVENESS_FAILURES` failures in a row (or a stopped serve
#: process, at once) mean serve is wedged: fall back.
LIVENESS_AFTER = 2.0
LIVENESS_EVERY = 1.0
LIVENESS_TIMEOUT = 3.0
LIVENESS_FAILURES = 3
#: A tool call still unanswered this long after serve's own deadline means serve is not answering.
CALL_GRACE = 10.0
#: serve's tool deadline when its `/health` does not say (older serve): the documented default.
DEFAULT_DEADLINE = 300.0
#: How long opening the session's GET stream may take before the handshake goes on without it.
GET_OPEN_TIMEOUT = 3.0
_REPLAY_ID = "dsh-memory-mcp-relay-replay"
_ANSWER_LOST = -32603


def read_serve_file(store_dir: str) -> tuple[ServeInfo | None, str]:
    """`(info, "")` for a `serve.json` `serve_file.read` trusts, naming a live pid and a plain http
    URL; else `(None, why not)`."""
    info, why = serve_file.read(store_dir)
    if info is None:
        return None, msg("没有运行中的 serve") if why == f"没有 {serve_file.SERVE_FILE_NAME}" else why
    if urllib.parse.urlsplit(info.url).scheme != "http":
        return None, msg("{name} 的地址不是 http://,中继不支持", name=serve_file.SERVE_FILE_NAME)
    if not info.alive:
        return None, msg("{name} 记录的进程 {pid} 已退出", name=serve_file.SERVE_FILE_NAME, pid=info.pid)
    return info, ""


@dataclass(frozen=True)
class Found:
    """A `serve` to relay to: its `serve.json` and the tool deadline its `/health` reported."""

    info: ServeInfo
    deadline: float


def find_serve(store_dir: str) -> tuple[Found | None, str]:
    """A `serve` this process can relay to, or `(None, why direct)`."""
    info, why = read_serve_file(store_dir)
    if info is None:
        return None, why
    health = serve_file.health(info, timeout=PROBE_TIMEOUT)
    if health is None:
        return None, msg("serve 无应答或不接受 serve.json 里的令牌")
    calls = health.get("toolCalls")
    deadline = calls.get("deadlineSecs") if isinstance(calls, dict) else None
    if not isinstance(deadline, (int, float)) or isinstance(deadline, bool) or deadline < 0:
        deadline = DEFAULT_DEADLINE
    return Found(info, float(deadline)), ""


def _connection(info: ServeInfo, timeout: float | None) -> http.client.HTTPConnection:
    parts = urllib.parse.urlsplit(info.url)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)


#: A connection to serve is kept for the next POST only this long (below uvicorn's 5 s idle close).
KEEP_ALIVE_SECS = 3.0
#: At most this many idle connections are kept.
KEEP_ALIVE_MAX = 8
#: What a kept connection that serve closed meanwhile raises on its next request or response.
_STALE_CONNECTION = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)

#: After the answer on an SSE stream: how long to wait for the stream's end, to reuse the connection.
SSE_END_SECS = 0.5


def _drained(conn: http.client.HTTPConnection, response: http.client.HTTPResponse) -> bool:
    """Whether the rest of an answered SSE stream ended within `SSE_END_SECS` (the connection is then
    reusable; anything still on it would have reached nobody)."""
    if conn.sock is None:
        return False
    try:
        conn.sock.settimeout(SSE_END_SECS)
        response.read(64 * 1024)
    except (OSError, http.client.HTTPException):
        return False
    return response.isclosed() and not response.will_close


def _abort(conn: http.client.HTTPConnection | None) -> None:
    """Make a read blocked on `conn` in another thread return at once (the socket is shut, not closed)."""
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def process_stopped(pid: int) -> bool:
    """Whether the system shows process `pid` as stopped (job control or a debugger); False where it
    cannot tell (no `/proc`)."""
    fields = fileio.proc_stat(pid)
    return bool(fields and fields[0] in (b"T", b"t"))


class _ServeGone(Exception):
    """`serve` failed or sent what the host must not see: fall back to a direct server."""


class _SessionLost(Exception):
    """`serve` answered 404 for our session id: it was reaped or serve restarted."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id[:8]}… not found")
        self.session_id = session_id


class _Call:
    """One request of the host's, from the moment it is read until it is answered (or cancelled)."""

    def __init__(self, line: bytes, message: wire.Message) -> None:
        self.line = line
        self.message = message
        self.ident = message.data["id"]
        self.key = wire.id_key(self.ident)
        self.method = message.method or ""
        token = wire.meta(message.data).get("progressToken")
        self.progress = wire.id_key(token) if token is not None else None
        self.started = time.monotonic()
        self.target = "serve"  # or "child" once serve has been given up on
        self.conn: http.client.HTTPConnection | None = None


class Relay:
    """One host's stdio ⇄ one `serve` (or, after a failure, a direct child server)."""

    def __init__(
        self,
        info: ServeInfo,
        *,
        project_dir: str,
        project_source: str,
        direct_argv: Sequence[str],
        stdin: IO[bytes],
        stdout: IO[bytes],
        log: Callable[[str], None],
        deadline: float = DEFAULT_DEADLINE,
    ) -> None:
        self.info = info
        self.path = urllib.parse.urlsplit(info.url).path or "/mcp"
        self.project_dir = project_dir
        self.project_source = project_source
        self.direct_argv = list(direct_argv)
        self.stdin = stdin
        self.stdout = stdout
        self.log = log
        #: A tool call unanswered this long is given up on (None: serve has no deadline).
        self.call_bound = deadline + CALL_GRACE if deadline > 0 else None
        self.session_id: str | None = None
        self.protocol_version: str | None = None  # negotiated by the handshake
        self.modern: str | None = None  # the per-request revision the host speaks, once seen
        self._init_line: bytes | None = None
        self._init_answered = False
        self._initialized_line: bytes | None = None
        self._initialized_sent = False
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._out_lock = threading.Lock()
        self._reinit_lock = threading.Lock()
        self._calls: dict[str, _Call] = {}
        self._server_requests: dict[str, str] = {}  # id key of a request to the host → "serve" | "child"
        self._inflight: dict[http.client.HTTPConnection, float] = {}  # POSTs being answered, watched ones
        self._get_conn: http.client.HTTPConnection | None = None
        #: kept-alive connections to serve between POSTs, with when each was put back (newest last)
        self._spare: list[tuple[http.client.HTTPConnection, float]] = []
        self._told: set[str] = set()
        self._cancelled: set[str] = set()  # id keys of requests the host cancelled (answers to drop quietly)
        self._gone = False
        self._stop = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._child_lock = threading.Lock()
        self._child_ready = threading.Event()  # the replayed initialize was answered
        self._child_open = threading.Event()  # the child may get the host's messages
        self._child_dead = False

    # -- output --------------------------------------------------------------------------------

    def _emit(self, line: bytes) -> None:
        with self._out_lock:
            try:
                self.stdout.write(line + b"\n")
                self.stdout.flush()
            except (BrokenPipeError, ValueError, OSError):
                # The host is gone; keep draining. The buffer goes to the null device (else the
                # interpreter's last flush fails: exit 120).
                with contextlib.suppress(Exception):
                    null = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(null, self.stdout.fileno())
                    os.close(null)

    def _tell_once(self, what: str, text: str) -> None:
        if what not in self._told:
            self._told.add(what)
            self.log(text)

    def _deliver(self, line: bytes, message: wire.Message, origin: str, call: _Call | None = None) -> bool:
        """Write one message from `origin` ("serve" or "child") to the host if the host may see it.

        :returns: whether it answered `call`.
        """
        if message.kind == "response":
            key = message.key
            with self._lock:
                target = self._calls.get(key) if key is not None else None
                if target is None or target.target != origin:
                    dropped = key not in self._cancelled  # an answer after the host's cancel: expected
                else:
                    dropped = False
                    del self._calls[target.key]
                    self._idle.notify_all()
                    if target.method == "initialize" and origin == "serve":
                        self._init_answered = True
                        self._remember_protocol(message)
                    self._emit(line)  # under the lock: a re-send to the child cannot answer it twice
            if dropped:
                self._tell_once(
                    "answer", msg("{origin} 发来一个不属于任何在途请求的应答(id {key}),已丢弃", origin=origin, key=key)
                )
                return False
            return target is call
        if message.kind == "request":
            with self._lock:
                self._server_requests[message.key or ""] = origin
            self._emit(line)
            return False
        if not self._notification_for_host(message, origin):
            self._tell_once(
                f"note:{message.method}",
                msg("{origin} 发来的 {method} 不属于宿主的任何请求,已丢弃", origin=origin, method=message.method),
            )
            return False
        self._emit(line)
        return False

    def _notification_for_host(self, message: wire.Message, origin: str) -> bool:
        params = message.data.get("params")
        params = params if isinstance(params, dict) else {}
        if message.method == "notifications/cancelled":
            key = wire.id_key(params.get("requestId"))
            with self._lock:
                return self._server_requests.pop(key, None) == origin
        if message.method == "notifications/progress":
            token = wire.id_key(params.get("progressToken"))
            with self._lock:
                return any(c.progress == token and c.target == origin for c in self._calls.values())
        return True

    def _remember_protocol(self, message: wire.Message) -> None:
        result = message.data.get("result")
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if isinstance(version, str):
            self.protocol_version = version

    # -- HTTP to serve -------------------------------------------------------------------------

    def _headers(self, message: wire.Message | None) -> dict[str, str]:
        """The headers of a POST of `message`, or (None) of the session's GET or DELETE."""
        headers = {
            "Authorization": f"Bearer {self.info.token}",
            "Accept": "application/json, text/event-stream",
            PROJECT_HEADER: encode_project(self.project_dir),
            PROJECT_SOURCE_HEADER: self.project_source,
        }
        if message is not None:
            headers["Content-Type"] = "application/json"
        version = wire.modern_version(message) if message is not None and message.kind == "request" else None
        if version is not None:
            self.modern = version
            return headers | wire.routing_headers(message, version)  # type: ignore[arg-type]
        if self.session_id:
            headers[SESSION_HEADER] = self.session_id
            if self.protocol_version:
                headers[wire.PROTOCOL_HEADER] = self.protocol_version
        elif self.modern:
            headers[wire.PROTOCOL_HEADER] = self.modern  # a notification of a per-request-era host
        return headers

    def _owns(self, call: _Call | None) -> bool:
        """Whether `call` still waits for serve's answer (not answered, cancelled or sent elsewhere)."""
        if call is None:
            return True
        with self._lock:
            return self._calls.get(call.key) is call and call.target == "serve"

    def _post(
        self,
        line: bytes,
        message: wire.Message,
        call: _Call | None,
        *,
        sink: list[wire.Message] | None = None,
    ) -> None:
        """POST one message and pass on what comes back (into `sink` instead, when given); returns
        quietly when `call` stopped waiting for serve meanwhile (answered, cancelled or moved).

        :raises _ServeGone: serve failed, or sent something the host must not see.
        :raises _SessionLost: 404 for the session id we sent.
        """
        headers = self._headers(message)
        sent_session = headers.get(SESSION_HEADER)
        watched = message.method != "subscriptions/listen"
        # The watchdog gives up on an overdue call first; the socket timeout is only a backstop.
        timeout = None if self.call_bound is None else self.call_bound + 5.0
        conn, kept = self._checkout(timeout)
        reusable = False
        try:
            try:
                response = self._exchange(conn, line, headers, call, watched)
            except _STALE_CONNECTION:
                if not kept or (call is not None and not self._owns(call)):
                    raise
                # serve closed the kept connection before it read this request: nothing of it
                # reached serve, so it goes again on a new connection.
                self._release(conn, call)
                conn.close()
                conn, kept = _connection(self.info, timeout), False
                response = self._exchange(conn, line, headers, call, watched)
            if response is None:
                return
            session = response.getheader(SESSION_HEADER)
            if session and not self.session_id and message.method == "initialize":
                self.session_id = session
            status = response.status
            ctype = (response.getheader("content-type") or "").split(";")[0].strip().lower()
            if status == 404 and sent_session:
                raise _SessionLost(sent_session)
            if status in (401, 403, 503):
                raise _ServeGone(f"HTTP {status}")
            answered = False
            if status == 200 and ctype == "text/event-stream":
                for data in wire.read_sse(response):
                    if self._take(data, call, sink):
                        answered = True
                        break
                clean = answered and _drained(conn, response)
            else:
                body = wire.read_body(response)
                clean = response.isclosed() and not response.will_close
                if status >= 400:
                    body = self._http_error(message, status, body)
                if body.strip():
                    answered = self._take(body, call, sink)
            if call is not None and not answered and self._owns(call):
                raise _ServeGone(msg("serve 的应答结束了,却没有这个请求的应答"))
            reusable = clean  # only a connection whose exchange ended well is kept
        except wire.Misbehaving as bad:
            raise _ServeGone(str(bad)) from bad
        except (OSError, http.client.HTTPException) as exc:
            if call is not None and not self._owns(call):
                return
            if isinstance(exc, TimeoutError):
                raise _ServeGone(msg("serve 长时间没有发来任何数据")) from exc
            raise _ServeGone(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
        finally:
            self._release(conn, call)
            if not (reusable and self._keep(conn, call)):
                conn.close()

    def _exchange(
        self,
        conn: http.client.HTTPConnection,
        line: bytes,
        headers: dict[str, str],
        call: _Call | None,
        watched: bool,
    ) -> http.client.HTTPResponse | None:
        """Send one POST on `conn` (watched and abortable while it runs) and return its response; None
        when `call` stopped waiting for serve before it went out."""
        with self._lock:
            if call is not None and (self._calls.get(call.key) is not call or call.target != "serve"):
                return None
            if self._gone:
                raise _ServeGone(msg("serve 已放弃"))
            if call is not None:
                call.conn = conn
            self._inflight[conn] = time.monotonic() if watched else float("inf")
        conn.request("POST", self.path, body=line, headers=headers)
        return conn.getresponse()

    def _release(self, conn: http.client.HTTPConnection, call: _Call | None) -> None:
        with self._lock:
            self._inflight.pop(conn, None)
            if call is not None and call.conn is conn:
                call.conn = None

    def _checkout(self, timeout: float | None) -> tuple[http.client.HTTPConnection, bool]:
        """A kept-alive connection to serve (and True), or a new one."""
        now = time.monotonic()
        with self._lock:
            while self._spare:
                conn, since = self._spare.pop()
                if now - since < KEEP_ALIVE_SECS and conn.sock is not None:
                    conn.timeout = timeout
                    conn.sock.settimeout(timeout)
                    return conn, True
                conn.close()
        return _connection(self.info, timeout), False

    def _keep(self, conn: http.client.HTTPConnection, call: _Call | None) -> bool:
        """Keep `conn` (its answer read whole, serve did not close it) for the next POST; False when
        it must be closed instead: serve given up on, or the call cancelled (its socket may be shut)."""
        if conn.sock is None or (call is not None and call.key in self._cancelled):
            return False
        with self._lock:
            if self._gone or len(self._spare) >= KEEP_ALIVE_MAX:
                return False
            self._spare.append((conn, time.monotonic()))
            return True

    def _close_spare(self) -> None:
        with self._lock:
            spare, self._spare = [c for c, _ in self._spare], []
        for conn in spare:
            conn.close()

    def _take(self, data: bytes, call: _Call | None, sink: list[wire.Message] | None) -> bool:
        """One message from serve → the host (or `sink`); whether it answered `call`.

        :raises wire.Misbehaving: it is not a JSON-RPC 2.0 message.
        """
        message = wire.parse(data)
        if message is None:
            raise wire.Misbehaving(msg("serve 发来的不是一条完整的 JSON-RPC 消息"))
        if sink is not None:
            sink.append(message)
            return message.kind == "response"
        return self._deliver(wire.one_line(data, message), message, "serve", call)

    def _http_error(self, message: wire.Message, status: int, body: bytes) -> bytes:
        """An HTTP error answer: serve's own JSON-RPC error for this request when it is one (the
        per-request era answers errors so), else a coded error the host can match to its id."""
        if message.kind != "request":
            return b""
        parsed = wire.parse(body.strip()) if body.strip() else None
        if parsed is not None and parsed.kind == "response" and parsed.key == message.key:
            return body
        detail = ""
        if parsed is not None and isinstance(parsed.data.get("error"), dict):
            detail = str(parsed.data["error"].get("message", ""))
        text = msg("serve 返回 HTTP {status}{detail}", status=status, detail=f":{detail}" if detail else "")
        return wire.rpc_error(message.data["id"], _ANSWER_LOST, text)

    def _to_serve(self, line: bytes, message: wire.Message, call: _Call | None) -> None:
        """Send one message to serve; a lost session is re-opened once and the message sent again.

        :raises _ServeGone: serve failed.
        """
        try:
            self._post(line, message, call)
            return
        except _SessionLost as lost:
            with self._reinit_lock:
                if self.session_id == lost.session_id:  # nobody re-opened it meanwhile
                    self.log(msg("serve 的会话已失效(可能因空闲被回收),重新建立会话"))
                    self._reopen()
        try:
            self._post(line, message, call)
        except _SessionLost as again:
            raise _ServeGone(str(again)) from again

    def _reopen(self) -> None:
        """A new session: the host's `initialize` again (answer swallowed), the GET stream, `initialized`."""
        if self._init_line is None:
            raise _ServeGone(msg("会话失效,且宿主没有发过 initialize"))
        self.session_id = None
        replay = _with_id(self._init_line, _REPLAY_ID)
        replies: list[wire.Message] = []
        self._post(replay, _checked(replay), None, sink=replies)
        answer = next((r for r in replies if r.kind == "response" and r.data.get("id") == _REPLAY_ID), None)
        if answer is None or "result" not in answer.data or not self.session_id:
            raise _ServeGone(msg("serve 不接受重放的 initialize"))
        self._remember_protocol(answer)
        if self._initialized_line is not None:
            self._open_get_stream()
            self._post(self._initialized_line, _checked(self._initialized_line), None, sink=[])

    def _open_get_stream(self) -> None:
        """Open the session's GET stream and wait for its headers, so that what serve asks right after
        the handshake (`roots/list`) reaches the host, and the session is not idle. Failure is not fatal."""
        session = self.session_id
        if not session or self._gone:
            return
        old, self._get_conn = self._get_conn, None
        _abort(old)
        headers = self._headers(None) | {"Accept": "text/event-stream"}
        conn = _connection(self.info, GET_OPEN_TIMEOUT)
        try:
            conn.request("GET", self.path, headers=headers)
            response = conn.getresponse()
            if response.status != 200 or conn.sock is None:
                response.read(64 * 1024)
                conn.close()
                return
            conn.sock.settimeout(None)  # a quiet stream is normal
        except (OSError, http.client.HTTPException):
            conn.close()
            return
        with self._lock:
            if self._gone:
                conn.close()
                return
            self._get_conn = conn
        threading.Thread(target=self._get_stream, args=(conn, response, session), name="relay-get", daemon=True).start()

    def _get_stream(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse, session: str) -> None:
        """serve's messages outside any request (e.g. `roots/list` after the handshake)."""
        try:
            for data in wire.read_sse(response):
                if self._gone or self.session_id != session:
                    break
                self._take(data, None, None)
        except wire.Misbehaving as bad:
            if not self._gone and self.session_id == session:
                self._serve_failed(str(bad))
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()

    # -- watching serve ------------------------------------------------------------------------

    def _watch(self) -> None:
        """While a request waits for serve: is serve still answering `/health`? Is a tool call overdue?"""
        failures = 0
        while not self._stop.wait(LIVENESS_EVERY):
            if self._gone:
                return
            now = time.monotonic()
            with self._lock:
                oldest = min(self._inflight.values(), default=float("inf"))
                overdue = self.call_bound is not None and any(
                    c.target == "serve" and c.method == "tools/call" and now - c.started > self.call_bound
                    for c in self._calls.values()
                )
            if overdue:
                bound = f"{self.call_bound - CALL_GRACE:g}"  # type: ignore[operator]
                self._serve_failed(msg("工具调用超过 serve 的截止时间 {secs} 秒仍无应答", secs=bound))
                return
            if now - oldest < LIVENESS_AFTER:
                failures = 0
                continue
            if process_stopped(self.info.pid):
                self._serve_failed(msg("serve 进程 {pid} 已被暂停(SIGSTOP / Ctrl+Z)", pid=self.info.pid))
                return
            if serve_file.health(self.info, timeout=LIVENESS_TIMEOUT) is not None:
                failures = 0
                continue
            failures += 1
            if failures >= LIVENESS_FAILURES:
                self._serve_failed(msg("serve 对 /health 没有应答(进程可能被暂停或卡死)"))
                return

    # -- the direct fallback -------------------------------------------------------------------

    def _serve_failed(self, why: str) -> None:
        """Give up on serve: the direct child from now on, every unanswered request sent to it again."""
        with self._lock:
            self._gone = True
            moved = [c for c in self._calls.values() if c.target == "serve"]
            for call in moved:
                call.target = "child"
            conns = [*self._inflight, self._get_conn]
        for conn in conns:
            _abort(conn)
        self._close_spare()
        self._start_child(why)
        for call in moved:
            self._send_to_child(call.line, call)

    def _start_child(self, why: str) -> None:
        with self._child_lock:
            if self._child is not None or self._child_dead:
                return
            self.log(msg("serve 不可用({why}),改为直连模式继续服务(记忆库相同)", why=why))
            env = dict(config.environ())
            env["DSH_MEMORY_RELAY"] = "off"
            try:
                child = subprocess.Popen(
                    [sys.executable, "-m", "dsh_memory_mcp", *self.direct_argv, "--no-relay"],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                )
            except OSError as exc:
                self.log(msg("无法启动直连服务({exc}),请求将得到错误应答", exc=exc))
                self._child_dead = True
                self._child_open.set()
                return
            self._child = child
            threading.Thread(target=self._pump_child, args=(child,), name="relay-child-out", daemon=True).start()
            if self._init_line is not None and self._init_answered:
                self._write_child(_with_id(self._init_line, _REPLAY_ID))
                self._child_ready.wait(60)
                if self._initialized_line is not None and self._initialized_sent:
                    self._write_child(self._initialized_line)
            self._child_open.set()

    def _write_child(self, line: bytes) -> bool:
        child = self._child
        if child is None or child.stdin is None:
            return False
        try:
            child.stdin.write(line + b"\n")
            child.stdin.flush()
            return True
        except (BrokenPipeError, ValueError, OSError):
            return False

    def _send_to_child(self, line: bytes, call: _Call | None = None) -> None:
        self._child_open.wait(90)
        if call is not None and not self._child_dead and self._child is not None:
            with self._lock:
                if self._calls.get(call.key) is not call:
                    return  # answered or cancelled meanwhile
        if (self._child_dead or not self._write_child(line)) and call is not None:
            self._answer_error(call, "serve 不可用,直连服务也没有启动成功")

    def _answer_error(self, call: _Call, text: str) -> None:
        with self._lock:
            if self._calls.get(call.key) is not call:
                return
            del self._calls[call.key]
            self._idle.notify_all()
            self._emit(wire.rpc_error(call.ident, _ANSWER_LOST, text))

    def _pump_child(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stdout is not None
        for raw in child.stdout:
            message = wire.parse(raw)
            if message is None:
                continue  # our own direct server writes only JSON-RPC; never pass on anything else
            if message.kind == "response" and message.data.get("id") == _REPLAY_ID:
                self._child_ready.set()
                continue
            self._deliver(wire.one_line(raw, message), message, "child")
        self._child_ready.set()
        with self._child_lock:
            self._child_dead = True
        with self._lock:
            left = [c for c in self._calls.values() if c.target == "child"]
        for call in left:
            self._answer_error(call, "直连服务进程意外退出")

    # -- the host's side -----------------------------------------------------------------------

    def _call(self, call: _Call) -> None:
        """Answer one request of the host's (through serve, or the child once serve is given up on)."""
        if call.target == "child":
            self._send_to_child(call.line, call)
            return
        try:
            self._to_serve(call.line, call.message, call)
        except _ServeGone as gone:
            self._serve_failed(str(gone) or type(gone).__name__)

    def _pass(self, line: bytes, message: wire.Message) -> None:
        """A notification, or the host's answer to a request of serve's (or the child's)."""
        if message.kind == "response":
            with self._lock:
                origin = self._server_requests.pop(message.key or "", None)
            if origin == "serve" and self._gone:
                return  # serve asked, serve is gone: nobody waits for it
        if self._gone:
            self._send_to_child(line)
            return
        if message.method == "notifications/initialized":
            self._initialized_line = line
            self._open_get_stream()  # before `initialized`: serve asks for roots right after it
        try:
            self._to_serve(line, message, None)
        except _ServeGone as gone:
            self._serve_failed(str(gone) or type(gone).__name__)
            self._send_to_child(line)
            return
        if message.method == "notifications/initialized":
            self._initialized_sent = True

    def _cancel(self, line: bytes, message: wire.Message) -> None:
        """`notifications/cancelled` from the host: stop waiting for that answer and tell whoever runs it."""
        params = message.data.get("params")
        key = wire.id_key(params.get("requestId")) if isinstance(params, dict) else None
        with self._lock:
            call = self._calls.pop(key, None) if key is not None else None
            if call is not None:
                if len(self._cancelled) > 1024:
                    self._cancelled.clear()
                self._cancelled.add(call.key)
            self._idle.notify_all()
        if call is not None and call.target == "serve":
            _abort(call.conn)  # the per-request era cancels by closing the request's stream
        if call is not None and call.target == "child":
            self._send_to_child(line)
        elif self.session_id or self._gone:
            self._pass(line, message)

    def run(self) -> int:
        """Relay until stdin ends; then answer what is in flight, close the session, return 0."""
        threading.Thread(target=self._watch, name="relay-watch", daemon=True).start()
        for raw, whole in wire.bounded_lines(self.stdin):
            if not whole:
                too_long = f"Invalid Request: 一行超过 {wire.MAX_LINE_BYTES // (1024 * 1024)} MiB"
                self._emit(wire.rpc_error(None, -32600, too_long))
                continue
            line = raw.strip()
            if not line:
                continue
            message = wire.parse(line)
            if message is None:
                self._emit(_refusal(line))  # answered here, like the direct server's input guard: serve would say 400
                continue
            if message.kind != "request":
                if message.method == "notifications/cancelled":
                    self._cancel(line, message)
                else:
                    self._pass(line, message)  # notifications and answers go in order, on this thread
                continue
            call = _Call(line, message)
            with self._lock:
                duplicate = call.key in self._calls
                if not duplicate:
                    self._calls[call.key] = call
                    if self._gone:
                        call.target = "child"
            if duplicate:
                self._emit(wire.rpc_error(call.ident, -32600, "Invalid Request: 这个 id 的上一个请求还没有应答"))
                continue
            if call.method == "initialize":
                self._init_line = line
                self._call(call)  # the handshake goes in order, on this thread
                continue
            threading.Thread(target=self._call, args=(call,), name="relay-call", daemon=True).start()
        return self._finish()

    def _finish(self) -> int:
        end = time.monotonic() + wire.DRAIN_SECONDS
        with self._lock:
            while self._calls and (left := end - time.monotonic()) > 0:
                self._idle.wait(left)
            unanswered = list(self._calls.values())
        for call in unanswered:
            self._answer_error(call, f"中继退出前 {wire.DRAIN_SECONDS:g} 秒内没有得到应答")
        self._stop.set()
        _abort(self._get_conn)
        self._close_spare()
        child = self._child
        if child is not None:
            if child.stdin is not None:
                try:
                    child.stdin.close()
                except OSError:
                    pass
            try:
                child.wait(max(1.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            return 0
        if self.session_id and not self._gone:
            conn = _connection(self.info, 2.0)
            try:
                conn.request("DELETE", self.path, headers=self._headers(None))
                conn.getresponse().read(64 * 1024)
            except (OSError, http.client.HTTPException):
                pass
            finally:
                conn.close()
        return 0


def _checked(line: bytes) -> wire.Message:
    message = wire.parse(line)
    assert message is not None
    return message


def _refusal(line: bytes) -> bytes:
    """The JSON-RPC error (-32700 / -32600) for a host line that is not a JSON-RPC 2.0 message."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return wire.rpc_error(None, -32700, "Parse error: 这一行不是 JSON")
    if not isinstance(message, dict):
        kind = "批量请求(数组)不受支持" if isinstance(message, list) else "消息必须是 JSON 对象"
        return wire.rpc_error(None, -32600, f"Invalid Request: {kind}")
    ident = message.get("id")
    valid_id = ident if wire.valid_id(ident) else None
    if message.get("jsonrpc") != "2.0":
        return wire.rpc_error(valid_id, -32600, 'Invalid Request: 需要 "jsonrpc": "2.0"')
    if "method" not in message and "result" not in message and "error" not in message:
        return wire.rpc_error(valid_id, -32600, "Invalid Request: 既不是请求也不是响应")
    return wire.rpc_error(None, -32600, "Invalid Request: 不是 JSON-RPC 2.0 消息")


def _with_id(line: bytes, new_id: str) -> bytes:
    message = json.loads(line)
    message["id"] = new_id
    return json.dumps(message, ensure_ascii=False).encode("utf-8")
