"""The relay: a stdio MCP server process that forwards its host's messages to a running `serve`.

A host that only speaks stdio spawns `dsh-memory-mcp` as usual. When `<store>/serve.json` names a live
`serve` that accepts its token, this process does not open the store at all: it copies each JSON-RPC
line from stdin to `POST /mcp` (Streamable HTTP) and each message that comes back (a JSON body or the
events of an SSE stream) to stdout, unchanged — so the host sees exactly `serve`'s tools, prompts and
resources, even ones newer than this relay. It imports neither the MCP SDK nor numpy (stdlib only),
which makes its cold start a fraction of a direct server's.

Failure handling, so that the host's next call still succeeds:
- the session was reaped or `serve` restarted (404 on our session id) → a new session is opened by
  replaying the host's `initialize` (+ `notifications/initialized`), then the message is sent again;
- `serve` is gone (connection refused/reset) → the relay falls back to a direct server: a child
  `dsh-memory-mcp --no-relay` with the same arguments, the host's `initialize` replayed to it (its
  answer swallowed), then every message from here on — the failed ones first — goes to that child.
  A message `serve` may have executed before dying is sent again: saves are deduplicated by content,
  a repeated forget deletes nothing more.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import IO, Any

from dsh_memory_mcp.transports import serve_file
from dsh_memory_mcp.transports.serve_file import ServeInfo

SESSION_HEADER = "mcp-session-id"
PROTOCOL_HEADER = "mcp-protocol-version"
PROJECT_HEADER = "X-DSH-Project"
PROJECT_SOURCE_HEADER = "X-DSH-Project-Source"
#: How long the start-up probe may take before we decide `serve` is not answering.
PROBE_TIMEOUT = 1.5
#: A tool call can run up to serve's deadline (300 s by default); reads wait longer than that.
READ_TIMEOUT = 900.0
#: At stdin EOF, in-flight requests get this long to be answered.
DRAIN_SECONDS = 30.0
_REPLAY_ID = "dsh-memory-mcp-relay-replay"


def read_serve_file(store_dir: str) -> tuple[ServeInfo | None, str]:
    """`(info, "")` for a trustworthy `serve.json` naming a live process, else `(None, why not)`.

    Trust rules are `serve_file.read`'s (a regular file of the current user's, not group/world-writable,
    not followed through a link); the relay adds that the pid is alive and the URL plain http.
    """
    info, why = serve_file.read(store_dir)
    if info is None:
        return None, "没有运行中的 serve" if why == f"没有 {serve_file.SERVE_FILE_NAME}" else why
    if urllib.parse.urlsplit(info.url).scheme != "http":
        return None, f"{serve_file.SERVE_FILE_NAME} 的地址不是 http://,中继不支持"
    if not info.alive:
        return None, f"{serve_file.SERVE_FILE_NAME} 记录的进程 {info.pid} 已退出"
    return info, ""


def probe(info: ServeInfo, timeout: float = PROBE_TIMEOUT) -> str:
    """ "" when `serve` answers `GET /health` with this token, else why not (for the start-up line)."""
    if serve_file.probe(info, timeout=timeout):
        return ""
    return "serve 无应答或不接受 serve.json 里的令牌"


def find_serve(store_dir: str) -> tuple[ServeInfo | None, str]:
    """A `serve` this process can relay to, or `(None, why direct)`."""
    info, why = read_serve_file(store_dir)
    if info is None:
        return None, why
    why = probe(info)
    return (info, "") if not why else (None, why)


def _endpoint(info: ServeInfo) -> urllib.parse.SplitResult:
    return urllib.parse.urlsplit(info.url)


def _connection(info: ServeInfo, timeout: float | None) -> http.client.HTTPConnection:
    parts = _endpoint(info)
    return http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)


def _request(
    info: ServeInfo, method: str, body: bytes | None, headers: dict[str, str], *, timeout: float
) -> tuple[int, http.client.HTTPMessage, bytes]:
    conn = _connection(info, timeout)
    try:
        conn.request(method, _endpoint(info).path or "/mcp", body=body, headers=_base_headers(info) | headers)
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def _base_headers(info: ServeInfo) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {info.token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }


def iter_sse(stream: IO[bytes]) -> Any:
    """The `data` of each server-sent event on `stream` (events without data are skipped)."""
    data: list[bytes] = []
    for raw in stream:
        line = raw.rstrip(b"\r\n")
        if not line:
            if data:
                yield b"\n".join(data)
                data = []
            continue
        if line.startswith(b":"):
            continue
        field, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            data.append(value)
    if data:
        yield b"\n".join(data)


class _ServeGone(Exception):
    """The connection to `serve` failed: fall back to a direct server."""


class _SessionLost(Exception):
    """`serve` answered 404 for our session id: it was reaped or serve restarted."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id[:8]}… not found")
        self.session_id = session_id


class Relay:
    """One host's stdio ⇄ one `serve` session (or, after a failure, a direct child server)."""

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
        env: dict[str, str] | None = None,
    ) -> None:
        self.info = info
        self.project_dir = project_dir
        self.project_source = project_source
        self.direct_argv = list(direct_argv)
        self.stdin = stdin
        self.stdout = stdout
        self.log = log
        self.env = env
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._init_line: bytes | None = None
        self._initialized_line: bytes | None = None
        self._out_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._reinit_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._child: subprocess.Popen[bytes] | None = None
        self._child_ready = threading.Event()
        self._child_lock = threading.Lock()
        self._closing = False

    # -- output --------------------------------------------------------------------------------

    def _emit(self, payload: bytes) -> None:
        payload = payload.strip()
        if not payload:
            return
        with self._out_lock:
            self.stdout.write(payload + b"\n")
            self.stdout.flush()

    # -- HTTP to serve -------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        # Percent-encoded UTF-8 (serve decodes it): http.client sends header values as Latin-1, so a
        # raw `/home/me/项目` would crash the relay (`transports.call_facts` has the contract).
        project = urllib.parse.quote(self.project_dir, safe="/")
        headers = {PROJECT_HEADER: project, PROJECT_SOURCE_HEADER: self.project_source}
        if self.session_id:
            headers[SESSION_HEADER] = self.session_id
        if self.protocol_version:
            headers[PROTOCOL_HEADER] = self.protocol_version
        return headers

    def _post(self, line: bytes, *, emit: bool = True) -> list[bytes]:
        """POST one message; returns (and, with `emit`, writes) the messages that came back.

        :raises _ServeGone: the connection failed.
        """
        conn = _connection(self.info, READ_TIMEOUT)
        headers = _base_headers(self.info) | self._headers()
        sent_session = headers.get(SESSION_HEADER)
        try:
            try:
                conn.request("POST", _endpoint(self.info).path or "/mcp", body=line, headers=headers)
                response = conn.getresponse()
            except OSError as exc:
                raise _ServeGone(f"{type(exc).__name__}: {exc}") from exc
            session = response.getheader(SESSION_HEADER)
            if session and not self.session_id:
                self.session_id = session
            ctype = (response.getheader("content-type") or "").split(";")[0].strip().lower()
            out: list[bytes] = []
            try:
                if response.status == 202:
                    response.read()
                elif ctype == "text/event-stream":
                    for data in iter_sse(response):
                        out.append(data)
                        if emit:
                            self._emit(data)
                else:
                    body = response.read()
                    if response.status == 404 and sent_session:
                        raise _SessionLost(sent_session)
                    if response.status in (401, 403):
                        raise _ServeGone(f"HTTP {response.status}")
                    if response.status >= 400:
                        body = _error_for(line, response.status, body)
                    if body.strip():
                        out.append(body)
                        if emit:
                            self._emit(body)
            except (OSError, http.client.HTTPException) as exc:
                raise _ServeGone(f"{type(exc).__name__}: {exc}") from exc
            return out
        finally:
            conn.close()

    def _initialize(self) -> None:
        """Open a session by sending the host's `initialize` (answer swallowed) and `initialized`."""
        assert self._init_line is not None
        self.session_id = None
        replies = self._post(_with_id(self._init_line, _REPLAY_ID), emit=False)
        self._remember_protocol(replies)
        if self._initialized_line is not None:
            self._post(self._initialized_line, emit=False)
            self._start_get_stream()

    def _remember_protocol(self, replies: list[bytes]) -> None:
        for reply in replies:
            try:
                message = json.loads(reply)
            except ValueError:
                continue
            if isinstance(message, dict) and isinstance(message.get("result"), dict):
                version = message["result"].get("protocolVersion")
                if isinstance(version, str):
                    self.protocol_version = version

    def _send_to_serve(self, line: bytes) -> list[bytes]:
        """Send one message to serve; re-open a lost session once; fall back when serve is gone."""
        try:
            try:
                return self._post(line)
            except _SessionLost as lost:
                with self._reinit_lock:
                    if self.session_id == lost.session_id:  # nobody re-opened it meanwhile
                        self.log("serve 的会话已失效(可能因空闲被回收),重新建立会话")
                        self._initialize()
                return self._post(line)
        except (_ServeGone, _SessionLost) as exc:
            self._fall_back(str(exc) or type(exc).__name__)
            self._send_to_child(line)
            return []

    def _start_get_stream(self) -> None:
        """Listen for server-initiated messages of the current session (one stream per session).

        An open GET stream also tells `serve` the host is still there: the session is not idle.
        """
        if self.session_id and self._child is None:
            threading.Thread(target=self._get_stream, name="relay-get", daemon=True).start()

    def _get_stream(self) -> None:
        """Server-initiated messages outside any request (e.g. `roots/list` asked between calls)."""
        try:
            conn = _connection(self.info, None)
            headers = _base_headers(self.info) | self._headers() | {"Accept": "text/event-stream"}
            headers.pop("Content-Type", None)
            conn.request("GET", _endpoint(self.info).path or "/mcp", headers=headers)
            response = conn.getresponse()
            if response.status != 200:
                response.read()
                conn.close()
                return
            for data in iter_sse(response):
                if self._child is not None:
                    break
                self._emit(data)
            conn.close()
        except (OSError, http.client.HTTPException):
            return

    # -- the direct fallback -------------------------------------------------------------------

    def _fall_back(self, why: str) -> None:
        with self._child_lock:
            if self._child is not None:
                return
            self.log(f"serve 不可用({why}),改为直连模式继续服务(记忆库相同)")
            env = dict(os.environ if self.env is None else self.env)
            env["DSH_MEMORY_RELAY"] = "off"
            child = subprocess.Popen(
                [sys.executable, "-m", "dsh_memory_mcp", *self.direct_argv, "--no-relay"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            self._child = child
            threading.Thread(target=self._pump_child, name="relay-child-out", daemon=True).start()
            if self._init_line is not None:
                self._write_child(_with_id(self._init_line, _REPLAY_ID))
                self._child_ready.wait(60)
                if self._initialized_line is not None:
                    self._write_child(self._initialized_line)
            else:
                self._child_ready.set()

    def _write_child(self, line: bytes) -> None:
        child = self._child
        assert child is not None and child.stdin is not None
        try:
            child.stdin.write(line.rstrip(b"\r\n") + b"\n")
            child.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def _send_to_child(self, line: bytes) -> None:
        self._child_ready.wait(60)
        self._write_child(line)

    def _pump_child(self) -> None:
        child = self._child
        assert child is not None and child.stdout is not None
        for raw in child.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                message = None
            if isinstance(message, dict) and message.get("id") == _REPLAY_ID and "method" not in message:
                self._child_ready.set()
                continue
            self._emit(raw)
        self._child_ready.set()

    # -- the loop ------------------------------------------------------------------------------

    def _handle(self, line: bytes) -> list[bytes]:
        if self._child is not None:
            self._send_to_child(line)
            return []
        return self._send_to_serve(line)

    def run(self) -> int:
        """Relay until stdin ends; then answer what is in flight, close the session, return 0."""
        for raw in self.stdin:
            line = raw.strip()
            if not line:
                continue
            refusal = _refuse(line)
            if refusal is not None:
                # Answered here, like the direct server's input guard: serve would only say 400.
                self._emit(refusal)
                continue
            message = _peek(line) or {}
            method = message.get("method")
            is_request = "id" in message and isinstance(method, str)
            if method == "initialize" and is_request:
                self._init_line = line
            elif method == "notifications/initialized":
                self._initialized_line = line
            if method == "initialize" or not is_request:
                # The handshake and notifications/responses go in order, on this thread.
                replies = self._handle(line)
                if method == "initialize":
                    self._remember_protocol(replies)
                elif method == "notifications/initialized":
                    self._start_get_stream()
                continue
            worker = threading.Thread(target=self._handle, args=(line,), name="relay-call", daemon=True)
            worker.start()
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(worker)
        return self._finish()

    def _finish(self) -> int:
        deadline = time.monotonic() + DRAIN_SECONDS
        for worker in self._threads:
            worker.join(max(0.0, deadline - time.monotonic()))
        child = self._child
        if child is not None:
            if child.stdin is not None:
                try:
                    child.stdin.close()
                except OSError:
                    pass
            try:
                child.wait(max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            return 0
        if self.session_id:
            try:
                _request(self.info, "DELETE", None, self._headers(), timeout=2.0)
            except OSError:
                pass
        return 0


def _peek(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _refuse(line: bytes) -> bytes | None:
    """A JSON-RPC error for a line that is not a JSON-RPC 2.0 message (-32700 / -32600), else None."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return _rpc_error(None, -32700, "Parse error: 这一行不是 JSON")
    if not isinstance(message, dict):
        kind = "批量请求(数组)不受支持" if isinstance(message, list) else "消息必须是 JSON 对象"
        return _rpc_error(None, -32600, f"Invalid Request: {kind}")
    ident = message.get("id")
    valid_id = ident if isinstance(ident, (str, int)) and not isinstance(ident, bool) else None
    if message.get("jsonrpc") != "2.0":
        return _rpc_error(valid_id, -32600, 'Invalid Request: 需要 "jsonrpc": "2.0"')
    if "method" not in message and "result" not in message and "error" not in message:
        return _rpc_error(valid_id, -32600, "Invalid Request: 既不是请求也不是响应")
    return None


def _rpc_error(ident: Any, code: int, message: str) -> bytes:
    payload = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


def _with_id(line: bytes, new_id: str) -> bytes:
    message = _peek(line) or {}
    message["id"] = new_id
    return json.dumps(message, ensure_ascii=False).encode("utf-8")


def _error_for(line: bytes, status: int, body: bytes) -> bytes:
    """An HTTP error answer to a request → a JSON-RPC error the host can match to its request id."""
    message = _peek(line)
    if not message or "id" not in message or "method" not in message:
        return b""
    detail = ""
    parsed = _peek(body)
    if parsed and isinstance(parsed.get("error"), dict):
        detail = str(parsed["error"].get("message", ""))
    return _rpc_error(message["id"], -32603, f"serve 返回 HTTP {status}" + (f":{detail}" if detail else ""))
