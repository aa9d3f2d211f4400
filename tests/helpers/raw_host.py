"""A host that speaks raw JSON-RPC lines to a spawned `python -m dsh_memory_mcp` over pipes.

For relay tests that must see every byte the host receives: `RawHost` sends lines, collects every
stdout line (`lines`), and waits under a deadline for the one a test wants (`wait_for`). `close()`
ends stdin and reaps the process; the context manager kills it if anything is left.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import subprocess_env

INIT_PARAMS = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw-host", "version": "1"}}


class RawHost:
    def __init__(self, store_dir: Path, errlog: Path, *args: str, **env: str) -> None:
        self.errlog = errlog
        with errlog.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dsh_memory_mcp", "--store-dir", str(store_dir), *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=subprocess_env(**env),
            )
        self.lines: list[bytes] = []  # every stdout line, as received (newline stripped)
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for raw in self.proc.stdout:
                self.lines.append(raw.rstrip(b"\n"))
                self._queue.put(raw.rstrip(b"\n"))
        self._queue.put(None)

    def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        data = message if isinstance(message, bytes) else json.dumps(message, ensure_ascii=False).encode()
        self.proc.stdin.write(data.rstrip(b"\n") + b"\n")
        self.proc.stdin.flush()

    def initialize(self, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        params = INIT_PARAMS | {"capabilities": capabilities or {}}
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        answer = self.wait_for(lambda m: m.get("id") == 0)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def wait_for(self, wanted: Callable[[dict[str, Any]], bool], timeout: float = 60.0) -> dict[str, Any]:
        """The next stdout message `wanted` accepts (earlier ones stay in `lines`)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no wanted message within {timeout} s; got {self.lines[-5:]}\n{self.stderr()}")
            try:
                raw = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if raw is None:
                raise AssertionError(f"the process ended first; got {self.lines[-5:]}\n{self.stderr()}")
            message = json.loads(raw)
            if wanted(message):
                return dict(message)

    def messages(self) -> list[dict[str, Any]]:
        """Every line received, each parsed on its own (fails on a line that is not one JSON object)."""
        out = []
        for raw in self.lines:
            message = json.loads(raw)
            assert isinstance(message, dict) and message.get("jsonrpc") == "2.0", raw[:200]
            out.append(message)
        return out

    def stderr(self) -> str:
        return self.errlog.read_text(encoding="utf-8", errors="replace")

    def close(self, timeout: float = 60.0) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return rc

    def __enter__(self) -> RawHost:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close(timeout=40)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            self._reader.join(timeout=10)
