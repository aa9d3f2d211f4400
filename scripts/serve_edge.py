"""serve's HTTP edge and the relay under hostile load, before → after: run it against source trees.

    python scripts/serve_edge.py --src /work/wt/x-before/src --src /work/wt/x/src [--quick]
        [--only NAME ...] [--loris N ...] [--fastmcp-python /path/to/venv/bin/python]

For each tree (interleaved, so the machine's load hits all alike) it starts a real
`dsh-memory-mcp serve` on loopback (`PYTHONPATH=<src>`, a fresh temp store) and measures:

* ``loris<N>``: N stranger connections (default 200 and 1,000), half trickling a request header
  that never ends, half trickling a 1 MB body that never ends, one byte a second each, for 60 s
  (``--quick`` 20 s), while a token holder asks ``GET /health`` once a second (5 s timeout):
  answered / asked, median and worst latency, how many strangers serve still holds at the end;
* ``fdlimit<N>``: serve started with RLIMIT_NOFILE = N (256: macOS's default; 1,024: Linux's soft
  default), strangers connect (half a header each) until 1.2 x N are open or connecting fails,
  then 6 ``GET /health`` with the token (5 s timeout);
* ``keepalive``: scripts/bench.py's keep-alive figure (``GET /health`` on one reused connection vs
  a new connection each time, medians, ratio);
* ``sessions``: serve's RSS after 3,000 sessions were opened (initialize + initialized);
* ``imports``: serve's peak RSS (VmHWM) over 4 parallel dry-run imports of a ~30 MB body;
* ``host``: the status of ``GET /health`` with the token and ``Host: 127.0.0.1:1``;
* ``short_token``: the exit code of ``DSH_MEMORY_TOKEN=x serve --host 0.0.0.0`` (stopped after
  10 s if it started);
* ``peer``: serve on 0.0.0.0; a session opened from 127.0.0.1, then another address of this
  machine with the same token and session id opens its GET stream, then the owner does;
* ``stale``: a 60 s old serve.json naming a live process that is not a serve: does serve start;
* ``clients401``: what mcp-remote and the Inspector CLI (tests/ts) and fastmcp print without the
  token: exit code, whether the text says where the token comes from, a browser sign-in, one line;
* ``relay``: the relay of each tree in front of tests/helpers/fake_serve.py answering a save with
  a non-JSON event, with an answer for an id the host never sent, or with one 200 MB event
  (``--quick`` 50 MB): answered after (s), ids and non-JSON lines the host got, relay peak RSS.

Every process it starts is stopped before it returns. Prints one line per measurement and tree
(with the load average), then one JSON object. Linux only (/proc, RLIMIT_NOFILE).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import resource
import shutil
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


def _loris_openers(s: Serve, n: int) -> list[tuple[socket.socket, bytes]]:
    """`n` stranger connections (no token): half trickle a request header that never ends, half
    send a whole header announcing 1 MB of body and then trickle the body. Returns (socket, drip)."""
    out = []
    for k in range(n):
        sock = socket.create_connection((s.host, s.port), timeout=5)
        if k % 2 == 0:
            sock.sendall(f"GET /health HTTP/1.1\r\nHost: {s.host}:{s.port}\r\nX-Slow: ".encode())
            drip = b"a"
        else:
            sock.sendall(
                f"POST /mcp HTTP/1.1\r\nHost: {s.host}:{s.port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: 1000000\r\n\r\n{{".encode()
            )
            drip = b" "
        sock.setblocking(False)
        out.append((sock, drip))
    return out


def _gone(sock: socket.socket) -> bool:
    """Has serve closed (or answered and closed) this connection? Reads what is waiting."""
    try:
        data = sock.recv(65536)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return not data or data.startswith(b"HTTP/1.1 408")


def _probe(s: Serve, timeout: float) -> tuple[int | None, float]:
    t0 = time.perf_counter()
    status = health_once(s, timeout)
    return status, (time.perf_counter() - t0) * 1000


def _probe_summary(probes: list[tuple[int | None, float]]) -> dict[str, Any]:
    ok = [ms for status, ms in probes if status == 200]
    return {
        "health_ok": len(ok),
        "health_of": len(probes),
        "health_p50_ms": round(statistics.median(ok), 1) if ok else None,
        "health_max_ms": round(max(ok), 1) if ok else None,
    }


def measure_loris(src: str, tmp: Path, n: int, window: float) -> dict[str, Any]:
    """N slow-loris connections trickling one byte a second each for `window` s, while a token holder
    asks `GET /health` once a second on a new connection (5 s timeout): answered, latency, how many
    of the strangers serve still holds at the end."""
    with serve(src, tmp) as s:
        conns = _loris_openers(s, n)
        probes: list[tuple[int | None, float]] = []
        done = threading.Event()

        def prober() -> None:
            while not done.is_set():
                probes.append(_probe(s, 5.0))
                done.wait(1.0)  # one probe a second: the measurement's pacing

        thread = threading.Thread(target=prober, daemon=True)
        thread.start()
        open_ = dict(conns)
        start = time.monotonic()
        last_closed = None
        try:
            while time.monotonic() - start < window:
                for sock in list(open_):
                    if _gone(sock):
                        del open_[sock]
                        last_closed = time.monotonic() - start
                        continue
                    try:
                        sock.send(open_[sock])
                    except BlockingIOError:
                        pass
                    except OSError:
                        del open_[sock]
                        last_closed = time.monotonic() - start
                time.sleep(1.0)  # the attack's pacing: one byte a second per connection
        finally:
            done.set()
            thread.join(timeout=10)
            for sock, _ in conns:
                sock.close()
        return {
            "n": n,
            "window_s": window,
            "held_at_end": len(open_),
            "last_closed_s": None if last_closed is None else round(last_closed, 1),
            **_probe_summary(probes),
        }


def measure_fdlimit(src: str, tmp: Path, nofile: int) -> dict[str, Any]:
    """serve with RLIMIT_NOFILE = `nofile`; strangers connect (half a header each) until connecting
    fails or 1.2 x `nofile` are open; then 6 token holders' `GET /health` (5 s timeout each)."""
    with serve(src, tmp, nofile=nofile) as s:
        socks: list[socket.socket] = []
        try:
            for _ in range(nofile * 6 // 5):
                try:
                    socks.extend(stalled(s, 1))
                except OSError:
                    break
            time.sleep(1.0)  # let serve accept what it can (it is measured, not asserted)
            probes = [_probe(s, 5.0) for _ in range(6)]
            held = sum(1 for sock in socks if not _gone(sock))
            return {"stalled": len(socks), "held": held, **_probe_summary(probes)}
        finally:
            for sock in socks:
                sock.close()


def measure_keepalive(src: str, tmp: Path, reps: int) -> dict[str, Any]:
    """scripts/bench.py's keep-alive figure (`keepalive_latency`), run on `src`'s serve."""
    saved, sys.argv = sys.argv, sys.argv[:1]  # bench reads --src from the command line at import
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import bench
    finally:
        sys.argv = saved
    store = tmp / f"store-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
    env.update(PYTHONPATH=src, HOME=str(tmp))
    with (tmp / f"keepalive-{uuid.uuid4().hex[:8]}.log").open("w", encoding="utf-8") as errlog:
        result: dict[str, Any] = bench.keepalive_latency(store, env, errlog, reps)
    return result


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


_INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "e", "version": "1"}},
    }
).encode()
_NOTE = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()


def measure_sessions(src: str, tmp: Path, n: int) -> dict[str, Any]:
    with serve(src, tmp) as s:
        base_rss = rss_kb(s.proc.pid)
        opened = refused = 0
        lock = threading.Lock()

        def worker(count: int) -> None:
            nonlocal opened, refused
            for _ in range(count):
                status, headers, _ = _post(s, "/mcp", _INIT, s.headers())
                sid = headers.get("mcp-session-id")
                if status != 200 or not sid:
                    with lock:
                        refused += 1
                    continue
                _post(s, "/mcp", _NOTE, s.headers(**{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}))
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


def _other_address() -> str | None:
    """An address of this machine that is not loopback (a second client to connect from), or None."""
    for target in ("10.255.255.255", "203.0.113.1"):
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.connect((target, 9))  # no packet is sent: this only picks the outgoing address
            address = str(probe.getsockname()[0])
        except OSError:
            continue
        finally:
            probe.close()
        if not address.startswith("127.") and address != "0.0.0.0":
            return address
    return None


def _open_stream(host: str, s: Serve, sid: str) -> tuple[http.client.HTTPConnection, int]:
    conn = http.client.HTTPConnection(host, s.port, timeout=10)
    headers = s.headers(
        **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18", "Host": f"127.0.0.1:{s.port}"},
        Accept="text/event-stream",
    )
    conn.request("GET", "/mcp", headers=headers)
    return conn, conn.getresponse().status


def measure_peer(src: str, tmp: Path) -> dict[str, Any]:
    """A session opened from 127.0.0.1; another address of this machine, with the same token and the
    session id, opens the session's GET stream first; then the owner opens it."""
    other = _other_address()
    if other is None:
        return {"skipped": "no non-loopback address"}
    token = base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
    with serve(src, tmp, args=("--host", "0.0.0.0"), DSH_MEMORY_TOKEN=token) as s:
        s.host, s.token = "127.0.0.1", token
        status, headers, _ = _post(s, "/mcp", _INIT, s.headers())
        sid = headers.get("mcp-session-id", "")
        _post(s, "/mcp", _NOTE, s.headers(**{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}))
        stranger, stranger_status = _open_stream(other, s, sid)
        try:
            owner, owner_status = _open_stream("127.0.0.1", s, sid)
            owner.close()
        finally:
            stranger.close()
        return {"init": status, "stranger_get": stranger_status, "owner_get": owner_status}


def measure_stale(src: str, tmp: Path) -> dict[str, Any]:
    """A serve.json (ours, 0600, 60 s old) naming a live process that is not a serve: does serve start?"""
    bystander = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    s = Serve(src, tmp)
    try:
        s.store.mkdir(parents=True, exist_ok=True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        path = s.store / "serve.json"
        info = {"url": f"http://127.0.0.1:{port}/mcp", "pid": bystander.pid, "token": "t" * 43}
        path.write_text(json.dumps(info | {"version": "0.1.0", "startedAt": 1}), encoding="utf-8")
        os.chmod(path, 0o600)
        old = time.time() - 60
        os.utime(path, (old, old))
        t0 = time.monotonic()
        try:
            s.wait_started(timeout=30)
            return {"started": True, "seconds": round(time.monotonic() - t0, 1), "exit_code": None}
        except RuntimeError:
            return {"started": False, "seconds": round(time.monotonic() - t0, 1), "exit_code": s.proc.poll()}
    finally:
        s.stop()
        bystander.kill()
        bystander.wait(timeout=10)


def _tail(text: str, *needles: str) -> str:
    """The last line of `text` that names one of `needles` (else its last line), shortened."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    hits = [line for line in lines if any(n in line for n in needles)]
    line = (hits or lines or [""])[-1]
    return line[:200]


def _client_run(cmd: list[str], tmp: Path, env: dict[str, str]) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            cmd,
            cwd=tmp,
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=90,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        out, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        code = None
    return {
        "exit": code,
        "hint": "serve.json" in out and "DSH_MEMORY_TOKEN" in out,
        "oauth_sign_in": any(k in out for k in ("Please authorize", "Browser opened", "Opening browser", "authorize?")),
        "says": _tail(out, "Error", "error", "rejected", "令牌"),
    }


def measure_clients401(src: str, tmp: Path, fastmcp_python: str | None) -> dict[str, Any]:
    """What real clients print when they connect without the token: mcp-remote and the Inspector CLI
    (tests/ts/node_modules), fastmcp (`--fastmcp-python`: an interpreter with fastmcp installed)."""
    ts = Path(__file__).resolve().parent.parent / "tests" / "ts" / "node_modules"
    node = shutil.which("node")
    home = tmp / f"home-{uuid.uuid4().hex[:8]}"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
    env.update(HOME=str(home), BROWSER="/bin/false", MCP_INSPECTOR_SECRET_STORE="memory")
    out: dict[str, Any] = {}
    with serve(src, tmp) as s:
        url = f"http://{s.host}:{s.port}/mcp"
        remote = ts / "mcp-remote" / "dist" / "proxy.js"
        inspector = ts / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
        if node and remote.is_file():
            out["mcp-remote"] = _client_run([node, str(remote), url, "--transport", "http-only"], tmp, env)
        if node and inspector.is_file():
            cmd = [node, str(inspector), "--cli", url, "--transport", "http", "--method", "tools/list"]
            out["inspector"] = _client_run([*cmd, "--stored-auth-only"], tmp, env)
        if fastmcp_python:
            code = (
                "import asyncio, sys\n"
                "from fastmcp import Client\n"
                "async def main():\n"
                "    async with Client(sys.argv[1]) as c:\n"
                "        await c.list_tools()\n"
                "asyncio.run(main())\n"
            )
            out["fastmcp"] = _client_run([fastmcp_python, "-c", code, url], tmp, env)
    return out


def _parsed(lines: list[bytes]) -> list[dict[str, Any]]:
    """The lines that are each one JSON object (the rest are what a host could not parse)."""
    out = []
    for line in list(lines):
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            out.append(message)
    return out


def measure_relay(src: str, tmp: Path, event_mb: int) -> dict[str, Any]:
    """The relay (`src`'s code) in front of a fake serve (tests/helpers/fake_serve.py) that answers
    a save with garbage, with answers for ids the host never sent, or with one `event_mb` MB event:
    did the host get an answer to its call, did anything but whole single-line JSON-RPC reach it,
    the relay's peak RSS."""
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.helpers.fake_serve import SSE_HEAD, FakeServe, Handler
    from tests.helpers.raw_host import RawHost

    def garbage(h: Handler, m: dict[str, Any]) -> None:
        h.head(200, SSE_HEAD)
        h.event("<html>502 Bad Gateway</html>")

    def wrong_ids(h: Handler, m: dict[str, Any]) -> None:
        h.head(200, SSE_HEAD)
        h.event({"jsonrpc": "2.0", "id": 999, "result": {"content": []}})
        h.event({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "ok"}]}})

    def oversize(h: Handler, m: dict[str, Any]) -> None:
        h.head(200, SSE_HEAD)
        h.raw(b'event: message\r\ndata: {"jsonrpc":"2.0","id":%d,"result":{"x":"' % m["id"])
        chunk = b"x" * (1 << 20)
        for _ in range(event_mb):
            h.raw(chunk)
        h.raw(b'"}}\r\n\r\n')

    out: dict[str, Any] = {}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call"}
    call["params"] = {"name": "memory_save", "arguments": {"content": "中继故障测量:这一条要保存"}}
    for name, scenario in (("garbage", garbage), ("wrong_ids", wrong_ids), (f"{event_mb}mb_event", oversize)):
        store = tmp / f"relay-{uuid.uuid4().hex[:8]}"
        with FakeServe(store, scenario), RawHost(store, tmp / f"relay-{name}.log", PYTHONPATH=src) as host:
            host.initialize()
            host.send(call)
            t0 = time.monotonic()
            answered: float | None = None
            while answered is None and time.monotonic() - t0 < 120 and host.proc.poll() is None:
                if any(m.get("id") == 7 for m in _parsed(host.lines)):
                    answered = round(time.monotonic() - t0, 1)
                time.sleep(0.1)  # polling the host's lines under a deadline
            peak = rss_kb(host.proc.pid, "VmHWM") if host.proc.poll() is None else -1
            host.close(timeout=30)
        parsed = _parsed(host.lines)
        bad = len(host.lines) - len(parsed)
        ids = [m.get("id") for m in parsed if "method" not in m]
        out[name] = {
            "answered_s": answered,
            "ids_host_got": ids,
            "not_json_lines": bad,
            "longest_line_mb": round(max((len(x) for x in host.lines), default=0) / 1e6, 1),
            "relay_peak_mb": round(peak / 1024, 1),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", action="append", required=True, help="a source tree (repeat: measured interleaved)")
    parser.add_argument("--quick", action="store_true", help="shorter slow-connection window, fewer sessions")
    parser.add_argument("--only", action="append", help="run only these measurements")
    parser.add_argument("--loris", type=int, action="append", help="slow-loris connection counts (default 200, 1000)")
    parser.add_argument("--fastmcp-python", help="an interpreter with fastmcp installed (for clients401)")
    args = parser.parse_args()
    window = 20.0 if args.quick else 60.0
    sessions = 1000 if args.quick else 3000
    body = import_body(30_000_000)
    plan: dict[str, Any] = {}
    for n in args.loris or [200, 1000]:
        plan[f"loris{n}"] = lambda src, tmp, n=n: measure_loris(src, tmp, n, window)
    plan |= {
        "fdlimit256": lambda src, tmp: measure_fdlimit(src, tmp, 256),
        "fdlimit1024": lambda src, tmp: measure_fdlimit(src, tmp, 1024),
        "keepalive": lambda src, tmp: measure_keepalive(src, tmp, 100 if args.quick else 300),
        "sessions": lambda src, tmp: measure_sessions(src, tmp, sessions),
        "imports": lambda src, tmp: measure_imports(src, tmp, body, 4),
        "host": measure_host,
        "short_token": measure_short_token,
        "peer": measure_peer,
        "stale": measure_stale,
        "clients401": lambda src, tmp: measure_clients401(src, tmp, args.fastmcp_python),
        "relay": lambda src, tmp: measure_relay(src, tmp, 50 if args.quick else 200),
    }
    results: dict[str, dict[str, Any]] = {src: {} for src in args.src}
    with tempfile.TemporaryDirectory(prefix="serve-edge-") as raw:
        tmp = Path(raw)
        for name, fn in plan.items():
            if args.only and not any(name.startswith(o) for o in args.only):
                continue
            for src in args.src:
                results[src][name] = fn(src, tmp)
                load = " ".join(f"{x:.2f}" for x in os.getloadavg())
                print(
                    f"{name:12s} [load {load}] {src}: {json.dumps(results[src][name], ensure_ascii=False)}", flush=True
                )
    print(json.dumps({"load": os.getloadavg(), "results": results}, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
