"""A real `python -m dsh_memory_mcp serve` on loopback: spawn, wait until it listens, stop, reap.

`running_serve(store_dir, …)` yields a `Serve` once `<store>/serve.json` names the child's pid
(written after the port is bound); the child is stopped with SIGTERM at the end of the block and
killed if it does not exit, so no test leaks a server. Raw HTTP helpers use `httpx` (a dependency
of the package) against the real socket.
"""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import subprocess_env
from tests.helpers.reap import stop_process

ACCEPT = "application/json, text/event-stream"


@dataclass
class Serve:
    proc: subprocess.Popen[str]
    store_dir: Path
    errlog: Path
    info: dict[str, Any]

    @property
    def url(self) -> str:
        return str(self.info["url"])

    @property
    def base(self) -> str:
        return self.url.rsplit("/mcp", 1)[0]

    @property
    def token(self) -> str:
        return str(self.info["token"])

    def auth(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": ACCEPT, "Content-Type": "application/json"} | extra

    def stderr(self) -> str:
        return self.errlog.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)

    def health(self) -> dict[str, Any]:
        r = httpx.get(f"{self.base}/health", headers=self.auth(), timeout=5)
        r.raise_for_status()
        return dict(r.json())


def spawn_serve(
    store_dir: Path, errlog: Path, *args: str, port: int = 0, nofile: int | None = None, **env: str
) -> subprocess.Popen[str]:
    """`nofile`: the child's RLIMIT_NOFILE (soft and hard), POSIX only."""
    cmd = [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(store_dir), "--port", str(port), *args]

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    err = errlog.open("w", encoding="utf-8")
    try:
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=subprocess_env(**env),
            text=True,
            encoding="utf-8",
            preexec_fn=limit if nofile is not None else None,
        )
    finally:
        err.close()


def wait_listening(proc: subprocess.Popen[str], store_dir: Path, errlog: Path, timeout: float = 30.0) -> dict[str, Any]:
    """`serve.json` of `proc` once it names it; fail with its stderr if it exits first."""
    path = store_dir / "serve.json"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve exited {proc.returncode}:\n{errlog.read_text(encoding='utf-8')}")
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = None
        if info and info.get("pid") == proc.pid and "已启动" in errlog.read_text(encoding="utf-8"):
            return dict(info)
        time.sleep(0.05)
    raise AssertionError(f"serve did not start in {timeout} s:\n{errlog.read_text(encoding='utf-8')}")


@contextmanager
def running_serve(
    store_dir: Path, errlog: Path, *args: str, port: int = 0, nofile: int | None = None, **env: str
) -> Iterator[Serve]:
    proc = spawn_serve(store_dir, errlog, *args, port=port, nofile=nofile, **env)
    try:
        info = wait_listening(proc, store_dir, errlog)
        yield Serve(proc=proc, store_dir=store_dir, errlog=errlog, info=info)
    finally:
        stop_process(proc)


def rss_kb(pid: int) -> int:
    """Resident set size of `pid` in KiB (Linux /proc)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def initialize(serve: Serve, client: httpx.Client, *, notify: bool = True, **headers: str) -> str:
    """Open a session by raw HTTP (initialize, then `notifications/initialized` unless `notify=False`)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    r = client.post(serve.url, json=body, headers=serve.auth(**headers))
    assert r.status_code == 200, (r.status_code, r.text)
    sid = r.headers["mcp-session-id"]
    if notify:
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        r = client.post(
            serve.url, json=note, headers=serve.auth(**{"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"})
        )
        assert r.status_code == 202, (r.status_code, r.text)
    return sid


def sse_result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a POST answered as one SSE event (or a JSON body)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return dict(json.loads(line[5:].strip()))
    raise AssertionError(f"no data in {response.text!r}")


_ids = itertools.count(100)


def call_tool(
    serve: Serve, client: httpx.Client, sid: str, name: str, arguments: dict[str, Any], **headers: str
) -> Any:
    """`tools/call` on session `sid`; the JSON-RPC `result` (ids are unique per process)."""
    body = {
        "jsonrpc": "2.0",
        "id": next(_ids),
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    r = client.post(
        serve.url,
        json=body,
        headers=serve.auth(**{"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}, **headers),
    )
    assert r.status_code == 200, (r.status_code, r.text)
    return sse_result(r)["result"]


def no_stack(text: str) -> bool:
    return "Traceback" not in text and 'File "' not in text
