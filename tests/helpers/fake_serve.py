"""A small real HTTP server posing as `serve`, to make the relay meet a misbehaving one.

`FakeServe(store_dir, on_call)` listens on loopback, writes `<store>/serve.json` (0600) naming this
test process and its token, answers `GET /health` as a live `serve` would, `initialize` with a
session id, notifications with 202 — and hands every `tools/call` to `on_call(handler, message)`,
which writes whatever bytes the scenario wants (a torn SSE event, garbage, a huge event, a wrong id)
through the helpers on `Handler`. Responses are HTTP/1.0: the body ends when the connection closes,
so a scenario that returns early has cut its stream.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import struct
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SSE_HEAD = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- what scenarios write -----------------------------------------------------------------

    def head(self, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()

    def raw(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

    def event(self, message: dict[str, Any] | str | bytes) -> None:
        data = message if isinstance(message, bytes) else (message if isinstance(message, str) else json.dumps(message))
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        self.raw(b"event: message\r\n" + b"".join(b"data: " + line.encode() + b"\r\n" for line in text.split("\n")) + b"\r\n")

    def reset(self) -> None:
        """End the connection with a TCP reset (SO_LINGER 0), not a clean close."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def json_answer(self, message: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        body = json.dumps(message).encode()
        self.head(200, {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})})
        self.raw(body)

    # -- routes -------------------------------------------------------------------------------

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {self.server.token}":
            return True
        self.head(401, {"Content-Length": "0"})
        return False

    def do_GET(self) -> None:
        if not self._authorized():
            return
        if self.path == "/health":
            if self.server.health_hangs.is_set():
                self.server.release.wait(120)  # accepted, never answered: a wedged serve
                return
            self.json_answer(
                {"ok": True, "name": "dsh-memory-mcp", "pid": os.getpid(), "toolCalls": {"deadlineSecs": self.server.deadline}}
            )
            return
        self.head(405, {"Content-Length": "0"})

    def do_DELETE(self) -> None:
        self.head(200, {"Content-Length": "0"})

    def do_POST(self) -> None:
        if not self._authorized():
            return
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        message = json.loads(body)
        self.server.seen.append((dict(self.headers), message))
        method = message.get("method")
        if "id" not in message or method is None:
            self.head(202, {"Content-Length": "0"})
            return
        if method == "initialize":
            result = {
                "protocolVersion": message["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake-serve", "version": "0"},
            }
            self.json_answer({"jsonrpc": "2.0", "id": message["id"], "result": result}, {"Mcp-Session-Id": "fake-session"})
            return
        if method == "tools/call":
            try:
                self.server.on_call(self, message)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the relay gave up on us, as it should
            return
        self.json_answer({"jsonrpc": "2.0", "id": message["id"], "result": {}})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    token: str
    deadline: float
    on_call: Callable[[Handler, dict[str, Any]], None]
    seen: list[tuple[dict[str, str], dict[str, Any]]]
    health_hangs: threading.Event  # set: /health stops answering
    release: threading.Event  # set: every held handler returns


class FakeServe:
    """Run as a context manager; `seen` lists every POST's headers and message."""

    def __init__(
        self, store_dir: Path, on_call: Callable[[Handler, dict[str, Any]], None], *, deadline: float = 300.0
    ) -> None:
        self.store_dir = store_dir
        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.token = secrets.token_urlsafe(16)
        self.server.deadline = deadline
        self.server.on_call = on_call
        self.server.seen = []
        self.server.health_hangs = threading.Event()
        self.server.release = threading.Event()
        self.thread = threading.Thread(target=self.server.serve_forever, name="fake-serve", daemon=True)

    @property
    def seen(self) -> list[tuple[dict[str, str], dict[str, Any]]]:
        return self.server.seen

    def __enter__(self) -> FakeServe:
        self.thread.start()
        port = self.server.server_address[1]
        info = {"url": f"http://127.0.0.1:{port}/mcp", "pid": os.getpid(), "token": self.server.token}
        self.store_dir.mkdir(parents=True, exist_ok=True)
        path = self.store_dir / "serve.json"
        path.write_text(json.dumps(info | {"version": "0", "startedAt": 1}), encoding="utf-8")
        os.chmod(path, 0o600)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.release.set()
        self.server.shutdown()
        self.server.server_close()
        (self.store_dir / "serve.json").unlink(missing_ok=True)
