"""serve's HTTP edge under hostile load, before → after: run it against one or more source trees.

    python scripts/serve_edge.py --src /work/wt/x-before/src --src /work/wt/x/src [--quick]

For each tree (interleaved, so the machine's load hits all alike) it starts a real
`dsh-memory-mcp serve` on loopback (`PYTHONPATH=<src>`, a fresh temp store) and measures:

* ``slow``: 200 connections that send half a request header and stall; how many serve still holds
  after the window (60 s, ``--quick`` 20 s) and when the last one was closed;
* ``fdlimit``: serve started with RLIMIT_NOFILE = 256, 300 stalled connections, then 6 requests
  ``GET /health`` with the token (5 s timeout each): how many were answered;
* ``keepalive``: median of ``GET /health`` on one reused connection vs on a new connection each;
* ``sessions``: serve's RSS after 3,000 sessions were opened (initialize + initialized);
* ``imports``: serve's peak RSS (VmHWM) over 4 parallel dry-run imports of a ~30 MB body;
* ``host``: the status of ``GET /health`` with the token and ``Host: 127.0.0.1:1``;
* ``short_token``: the exit code of ``DSH_MEMORY_TOKEN=x serve --host 0.0.0.0`` (killed after 10 s
  if it started).

Prints one JSON object per tree and a short table. Linux only (/proc, RLIMIT_NOFILE).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ACCEPT = "application/json, text/event-stream"


class Serve:
    def __init__(self, src: str, tmp: Path, *, nofile: int | None = None, args: tuple[str, ...] = (), **env: str):
        self.store = tmp / f"store-{uuid.uuid4().hex[:8]}"
        self.errlog = tmp / f"serve-{uuid.uuid4().hex[:8]}.log"
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
        full_env.update(PYTHONPATH=src, DSH_MEMORY_STORE_DIR=str(self.store), HOME=str(tmp), **env)

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        with self.errlog.open("w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(self.store), "--port", "0", *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=full_env,
                preexec_fn=limit,
            )

    def wait_started(self, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited {self.proc.returncode}: {self.errlog.read_text(encoding='utf-8')}")
            with contextlib.suppress(OSError, ValueError):
                info = json.loads((self.store / "serve.json").read_text(encoding="utf-8"))
                if info.get("pid") == self.proc.pid and "已启动" in self.errlog.read_text(encoding="utf-8"):
                    self.info = info
                    host, _, port = info["url"].split("//", 1)[1].split("/", 1)[0].rpartition(":")
                    self.host, self.port, self.token = host, int(port), str(info["token"])
                    return info
            time.sleep(0.05)
        raise RuntimeError("serve did not start")

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", "Accept": ACCEPT, "Content-Type": "application/json"} | extra

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@contextlib.contextmanager
def serve(src: str, tmp: Path, **kwargs: Any) -> Iterator[Serve]:
    s = Serve(src, tmp, **kwargs)
    try:
        s.wait_started()
        yield s
    finally:
        s.stop()


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def stalled(s: Serve, n: int) -> list[socket.socket]:
    """`n` connections that each sent half a request header."""
    out = []
    for _ in range(n):
        sock = socket.create_connection((s.host, s.port), timeout=5)
        sock.sendall(f"GET /health HTTP/1.1\r\nHost: {s.host}:{s.port}\r\nX-Slow: ".encode())
        sock.setblocking(False)
        out.append(sock)
    return out


def watch_closed(socks: list[socket.socket], window: float) -> dict[str, Any]:
    """Until `window` s pass or all are closed by serve: how many remain, when the last closed."""
    start = time.monotonic()
    sel = selectors.DefaultSelector()
    for sock in socks:
        sel.register(sock, selectors.EVENT_READ)
    open_ = set(socks)
    last = None
    while open_ and time.monotonic() - start < window:
        for key, _ in sel.select(timeout=0.2):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data or b"408" in data:  # closed (or answered 408 just before closing)
                with contextlib.suppress(OSError, KeyError):
                    sel.unregister(sock)
                open_.discard(sock)
                last = time.monotonic() - start
    sel.close()
    return {"held": len(open_), "of": len(socks), "last_closed_s": None if last is None else round(last, 1)}


def health_once(s: Serve, timeout: float, host: str | None = None) -> int | None:
    conn = http.client.HTTPConnection(s.host, s.port, timeout=timeout)
    try:
        headers = s.headers()
        if host is not None:
            headers["Host"] = host
        conn.request("GET", "/health", headers=headers)
        return conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()


def measure_slow(src: str, tmp: Path, window: float) -> dict[str, Any]:
    with serve(src, tmp) as s:
        socks = stalled(s, 200)
        try:
            out = watch_closed(socks, window)
            out["health_during"] = health_once(s, 5.0)
            return out
        finally:
            for sock in socks:
                sock.close()


def measure_fdlimit(src: str, tmp: Path) -> dict[str, Any]:
    with serve(src, tmp, nofile=256) as s:
        socks: list[socket.socket] = []
        try:
            for _ in range(300):
                try:
                    socks.extend(stalled(s, 1))
                except OSError:
                    break
            time.sleep(1.0)  # let serve accept what it can (it is measured, not asserted)
            answers = [health_once(s, 5.0) for _ in range(6)]
            return {"stalled": len(socks), "answered": sum(1 for a in answers if a == 200), "of": len(answers)}
        finally:
            for sock in socks:
                sock.close()


def measure_keepalive(src: str, tmp: Path, reps: int) -> dict[str, Any]:
    with serve(src, tmp) as s:
        headers = s.headers()
        reused = http.client.HTTPConnection(s.host, s.port, timeout=10)
        times_reused, times_new = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            reused.request("GET", "/health", headers=headers)
            reused.getresponse().read()
            times_reused.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fresh = http.client.HTTPConnection(s.host, s.port, timeout=10)
            fresh.request("GET", "/health", headers=headers)
            fresh.getresponse().read()
            fresh.close()
            times_new.append(time.perf_counter() - t0)
        reused.close()
        r, n = statistics.median(times_reused) * 1000, statistics.median(times_new) * 1000
        return {"reused_ms": round(r, 2), "new_ms": round(n, 2), "ratio_reused_vs_new": round(r / n, 2)}


def _post(
    s: Serve, path: str, body: bytes, headers: dict[str, str], timeout: float = 120
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(s.host, s.port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def measure_sessions(src: str, tmp: Path, n: int) -> dict[str, Any]:
    with serve(src, tmp) as s:
        base_rss = rss_kb(s.proc.pid)
        init = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "e", "version": "1"},
                },
            }
        ).encode()
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
        opened = refused = 0
        lock = threading.Lock()

        def worker(count: int) -> None:
            nonlocal opened, refused
            for _ in range(count):
                status, headers, _ = _post(s, "/mcp", init, s.headers())
                sid = headers.get("mcp-session-id")
                if status != 200 or not sid:
                    with lock:
                        refused += 1
                    continue
                _post(s, "/mcp", note, s.headers(**{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}))
                with lock:
                    opened += 1

        threads = [threading.Thread(target=worker, args=(n // 4,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(1.0)
        conn = http.client.HTTPConnection(s.host, s.port, timeout=10)
        conn.request("GET", "/health", headers=s.headers())
        live = json.loads(conn.getresponse().read()).get("sessions")
        conn.close()
        return {
            "opened": opened,
            "refused": refused,
            "live_sessions": live,
            "rss_mb": round(rss_kb(s.proc.pid) / 1024, 1),
            "base_rss_mb": round(base_rss / 1024, 1),
        }


def import_body(size: int) -> bytes:
    """A dry-run import body of about `size` bytes: our own record lines, base64 as the page sends them."""
    lines = []
    total = 0
    k = 0
    target = size * 3 // 4
    while total < target:
        content = f"导入压测 {k} " + "项目约定与部署步骤 " * 6
        line = json.dumps(
            {
                "id": uuid.UUID(int=k).hex,
                "scope": "global",
                "kind": "fact",
                "content": content,
                "tags": ["bench"],
                "createdAt": 1700000000000,
                "updatedAt": 1700000000000,
            },
            ensure_ascii=False,
        )
        lines.append(line)
        total += len(line.encode()) + 1
        k += 1
    data = ("\n".join(lines) + "\n").encode()
    return json.dumps({"data": base64.b64encode(data).decode(), "scope": "global", "dryRun": True}).encode()


def measure_imports(src: str, tmp: Path, body: bytes, parallel: int) -> dict[str, Any]:
    with serve(src, tmp) as s:
        base = rss_kb(s.proc.pid)
        statuses: list[int] = []
        headers = s.headers(Origin=f"http://{s.host}:{s.port}")

        def one() -> None:
            status, _, _ = _post(s, "/api/import", body, headers, timeout=600)
            statuses.append(status)

        threads = [threading.Thread(target=one) for _ in range(parallel)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {
            "body_mb": round(len(body) / 1e6, 1),
            "parallel": parallel,
            "statuses": sorted(statuses),
            "seconds": round(time.monotonic() - t0, 1),
            "base_rss_mb": round(base / 1024, 1),
            "peak_rss_mb": round(rss_kb(s.proc.pid, "VmHWM") / 1024, 1),
        }


def measure_host(src: str, tmp: Path) -> dict[str, Any]:
    with serve(src, tmp) as s:
        return {
            "own_port": health_once(s, 5.0, host=f"127.0.0.1:{s.port}"),
            "wrong_port": health_once(s, 5.0, host="127.0.0.1:1"),
        }


def measure_short_token(src: str, tmp: Path) -> dict[str, Any]:
    s = Serve(src, tmp, args=("--host", "0.0.0.0"), DSH_MEMORY_TOKEN="x")
    try:
        code = s.proc.wait(timeout=10)
        started = False
    except subprocess.TimeoutExpired:
        code, started = None, True
    finally:
        s.stop()
    tail = [line for line in s.errlog.read_text(encoding="utf-8").splitlines() if line.strip()][-3:]
    return {"exit_code": code, "started": started, "stderr_tail": tail}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", required=True, help="a source tree (repeat: measured interleaved)")
    parser.add_argument("--quick", action="store_true", help="shorter slow-connection window, fewer sessions")
    parser.add_argument("--only", action="append", help="run only these measurements")
    args = parser.parse_args()
    window = 20.0 if args.quick else 60.0
    sessions = 1000 if args.quick else 3000
    body = import_body(30_000_000)
    plan = {
        "slow": lambda src, tmp: measure_slow(src, tmp, window),
        "fdlimit": measure_fdlimit,
        "keepalive": lambda src, tmp: measure_keepalive(src, tmp, 100 if args.quick else 300),
        "sessions": lambda src, tmp: measure_sessions(src, tmp, sessions),
        "imports": lambda src, tmp: measure_imports(src, tmp, body, 4),
        "host": measure_host,
        "short_token": measure_short_token,
    }
    results: dict[str, dict[str, Any]] = {src: {} for src in args.src}
    with tempfile.TemporaryDirectory(prefix="serve-edge-") as raw:
        tmp = Path(raw)
        for name, fn in plan.items():
            if args.only and name not in args.only:
                continue
            for src in args.src:
                results[src][name] = fn(src, tmp)
                print(f"{name:12s} {src}: {json.dumps(results[src][name], ensure_ascii=False)}", flush=True)
    print(json.dumps({"load": os.getloadavg(), "results": results}, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
