"""Before/after figures for the relay (both eras, roots, serve killed or stopped under a call).

Runs two source trees side by side — `--before` (e.g. a worktree of 11f31c0) and `--after` (this
tree) — each with its own real `serve` and store, interleaving the measurements so the machine's
load hits both alike, and prints one table per part with the load average next to it:

- `latency`: relayed sessions of the official Python client with roots declared, mode `auto` and
  `legacy`: the first call's latency (p50 / max), the negotiated revision, where the project came from;
- `revision`: the revision the same client negotiates direct (no serve) in each mode;
- `inspector`: wall time of the MCP Inspector CLI (`tests/ts`) doing one `memory_search`, direct and
  relayed (median of `--inspector` runs);
- `kill` / `stop`: a relayed save waits inside serve (another process holds the scope lock) when
  serve gets SIGKILL / SIGSTOP; outcome (answered through the fallback / error / hung) and the time
  from the signal to the answer.

    python scripts/relay_figures.py --before /work/wt/relay-before/src --sessions 20 --kills 9 --stops 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ListRootsResult, Root

HERE = Path(__file__).resolve().parent.parent
INSPECTOR = HERE / "tests" / "ts" / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher"
INSPECTOR_JS = INSPECTOR / "build" / "index.js"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}/{fifteen:.1f}"


def env_for(src: str, store: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
    env.update(PYTHONPATH=src, DSH_MEMORY_STORE_DIR=str(store), DSH_MEMORY_VECTOR="off", PYTHONUNBUFFERED="1")
    env["XDG_STATE_HOME"] = str(store.parent / "state")
    env.update(extra)
    return env


class Serve:
    def __init__(self, src: str, store: Path) -> None:
        self.store = store
        store.mkdir(parents=True, exist_ok=True)
        self.errlog = store.parent / f"serve-{os.getpid()}-{id(self)}.log"
        with self.errlog.open("w", encoding="utf-8") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dsh_memory_mcp", "serve", "--port", "0", "--store-dir", str(store)],
                env=env_for(src, store),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.info = json.loads((store / "serve.json").read_text(encoding="utf-8"))
                if self.info.get("pid") == self.proc.pid and "已启动" in self.errlog.read_text(encoding="utf-8"):
                    return
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"serve exited: {self.errlog.read_text(encoding='utf-8')}")
            time.sleep(0.05)
        raise SystemExit("serve did not start")

    def running_calls(self) -> int | None:
        base = self.info["url"].rsplit("/mcp", 1)[0]
        request = urllib.request.Request(f"{base}/health", headers={"Authorization": f"Bearer {self.info['token']}"})
        try:
            with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=3) as r:
                return int(json.loads(r.read())["toolCalls"]["running"])
        except (OSError, ValueError, KeyError):
            return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# ----------------------------------------------------------------------------------------------
# latency / revision: the official Python client


async def _session(src: str, store: Path, mode: str, roots_dir: Path, cwd: Path, relay: bool) -> dict[str, Any]:
    args = ["-m", "dsh_memory_mcp", "--store-dir", str(store)] + ([] if relay else ["--no-relay"])
    params = StdioServerParameters(command=sys.executable, args=args, env=env_for(src, store), cwd=str(cwd))

    async def list_roots(_ctx: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=roots_dir.as_uri())])

    with open(os.devnull, "w", encoding="utf-8") as devnull:
        async with Client(
            stdio_client(params, errlog=devnull), mode=mode, list_roots_callback=list_roots  # type: ignore[arg-type]
        ) as client:
            start = time.perf_counter()
            saved = await client.call_tool("memory_save", {"content": f"figure {time.time_ns()}", "scope": "project"})
            first = time.perf_counter() - start
            text = "".join(getattr(b, "text", "") for b in saved.content)
            source = text.rsplit("[来自 ", 1)[-1].rstrip("]") if "[来自 " in text else "?"
            return {"revision": client.protocol_version, "first": first, "source": source}


def part_latency(trees: dict[str, str], work: Path, sessions: int) -> None:
    print(f"\n== relayed first call with roots declared, {sessions} sessions per cell ({load()})")
    serves = {name: Serve(src, work / name / "store") for name, src in trees.items()}
    roots_dir = work / "workspace"
    roots_dir.mkdir(exist_ok=True)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for _ in range(sessions):
            for mode in ("auto", "legacy"):
                for name, src in trees.items():
                    out = anyio.run(_session, src, serves[name].store, mode, roots_dir, work, True)
                    results.setdefault((name, mode), []).append(out)
    finally:
        for serve in serves.values():
            serve.stop()
    print(f"{'tree':8} {'mode':7} {'revision':11} {'project source':18} {'p50 s':>7} {'max s':>7}")
    for (name, mode), runs in results.items():
        firsts = [r["first"] for r in runs]
        revisions = sorted({str(r["revision"]) for r in runs})
        sources = sorted({r["source"] for r in runs})
        print(
            f"{name:8} {mode:7} {','.join(revisions):11} {','.join(sources):18} "
            f"{statistics.median(firsts):7.2f} {max(firsts):7.2f}"
        )
    print(f"({load()})")


def part_revision(trees: dict[str, str], work: Path) -> None:
    print(f"\n== revision negotiated direct (no serve) vs relayed ({load()})")
    roots_dir = work / "workspace"
    roots_dir.mkdir(exist_ok=True)
    for mode in ("auto", "legacy"):
        for name, src in trees.items():
            store = work / f"{name}-direct" / "store"
            store.mkdir(parents=True, exist_ok=True)
            direct = anyio.run(_session, src, store, mode, roots_dir, work, False)
            serve = Serve(src, work / f"{name}-relayed" / "store")
            try:
                relayed = anyio.run(_session, src, serve.store, mode, roots_dir, work, True)
            finally:
                serve.stop()
            print(
                f"{name:8} {mode:7} direct {direct['revision']} ({direct['source']}), "
                f"relayed {relayed['revision']} ({relayed['source']})"
            )


# ----------------------------------------------------------------------------------------------
# inspector


def _inspector_search(src: str, store: Path, work: Path, relay: bool) -> float:
    node = shutil.which("node")
    assert node is not None
    env = env_for(src, store, HOME=str(work), MCP_CATALOG_PATH=str(work / "catalog.json"))
    env_args = [a for k in ("DSH_MEMORY_STORE_DIR", "DSH_MEMORY_VECTOR", "PYTHONPATH", "XDG_STATE_HOME") for a in ("-e", f"{k}={env[k]}")]
    server = [sys.executable, "-m", "dsh_memory_mcp", "--store-dir", str(store)] + ([] if relay else ["--no-relay"])
    cmd = [node, str(INSPECTOR_JS), "--cli", *env_args, *server, "--method", "tools/call"]
    cmd += ["--tool-name", "memory_search", "--tool-arg", "query=部署"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, encoding="utf-8", timeout=120, check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0 or '"isError": false' not in proc.stdout:
        raise SystemExit(f"inspector failed: {proc.stdout[-500:]} {proc.stderr[-1500:]}")
    return took


def part_inspector(trees: dict[str, str], work: Path, runs: int) -> None:
    if not INSPECTOR_JS.is_file() or shutil.which("node") is None:
        print("\n== inspector: skipped (no node or tests/ts/node_modules)")
        return
    print(f"\n== MCP Inspector CLI, one memory_search, median of {runs} ({load()})")
    serves = {name: Serve(src, work / f"{name}-ins" / "store") for name, src in trees.items()}
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(runs):
            for name, src in trees.items():
                for how in ("direct", "relayed"):
                    took = _inspector_search(src, serves[name].store, work, how == "relayed")
                    times.setdefault((name, how), []).append(took)
    finally:
        for serve in serves.values():
            serve.stop()
    for name in trees:
        direct, relayed = statistics.median(times[(name, "direct")]), statistics.median(times[(name, "relayed")])
        print(f"{name:8} direct {direct:5.2f} s, relayed {relayed:5.2f} s")
    print(f"({load()})")


# ----------------------------------------------------------------------------------------------
# kill / stop: a raw host, a lock holder, a signal


class RawHost:
    def __init__(self, src: str, store: Path, errlog: Path) -> None:
        self.errlog = errlog
        with errlog.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "dsh_memory_mcp", "--store-dir", str(store)],
                env=env_for(src, store),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def answer(self, ident: int, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                raw = self.lines.get(timeout=min(left, 0.1))
            except queue.Empty:
                continue
            if raw is None:
                return None
            try:
                message = json.loads(raw)
            except ValueError:
                return {"torn": raw[:80].decode("utf-8", "replace")}
            if message.get("id") == ident and "method" not in message:
                return dict(message)
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(45)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@contextlib.contextmanager
def lock_holder(src: str, store: Path) -> Iterator[subprocess.Popen[bytes]]:
    code = (
        "import sys, time; from dsh_memory_mcp.store.shared import SharedStore\n"
        "with SharedStore(sys.argv[1]).lock('global'):\n"
        "    print('locked', flush=True); sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(store)], env=env_for(src, store), stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"locked":
        raise SystemExit("lock holder failed")
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]


def _one_signal(src: str, work: Path, sig: signal.Signals, cap: float) -> tuple[str, float]:
    root = Path(tempfile.mkdtemp(dir=work))
    store = root / "store"
    store.mkdir()
    serve = Serve(src, store)
    host: RawHost | None = None
    try:
        with lock_holder(src, store) as holder:
            host = RawHost(src, store, root / "relay.log")
            init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "figures", "version": "1"}}
            host.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
            if host.answer(0, 30) is None:
                return "no initialize", 0.0
            host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            save = {"name": "memory_save", "arguments": {"content": f"{sig.name} figure"}}
            host.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": save})
            deadline = time.monotonic() + 30
            while serve.running_calls() != 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            signalled = time.monotonic()
            serve.proc.send_signal(sig)
            answer: dict[str, Any] | None = None
            released = False
            while answer is None and time.monotonic() - signalled < cap:
                if not released and "改为直连模式" in host.errlog.read_text(encoding="utf-8", errors="replace"):
                    holder.kill()  # the direct child's save may take the lock now (reaped: a zombie holds it)
                    holder.wait(10)
                    released = True
                answer = host.answer(1, 0.2)
            took = time.monotonic() - signalled
            fell_back = "改为直连模式" in host.errlog.read_text(encoding="utf-8", errors="replace")
            if answer is None:
                return ("hung, fallback started" if fell_back else "hung"), took
            if "torn" in answer:
                return "torn line", took
            if "error" in answer:
                return f"error {answer['error'].get('code')}", took
            ok = (answer.get("result") or {}).get("structuredContent", {}).get("ok")
            return ("answered via fallback" if fell_back else "answered") + ("" if ok else " (not ok)"), took
    finally:
        serve.stop()
        if host is not None:
            host.close()


def part_signal(trees: dict[str, str], work: Path, sig: signal.Signals, runs: int, cap: float) -> None:
    print(f"\n== serve gets {sig.name} under a relayed save, {runs} runs per tree, cap {cap:g} s ({load()})")
    outcomes: dict[str, list[tuple[str, float]]] = {name: [] for name in trees}
    for _ in range(runs):
        for name, src in trees.items():
            outcomes[name].append(_one_signal(src, work, sig, cap))
    for name, runs_ in outcomes.items():
        counts: dict[str, int] = {}
        for outcome, _ in runs_:
            counts[outcome] = counts.get(outcome, 0) + 1
        times = [t for _, t in runs_]
        summary = ", ".join(f"{n}× {o}" for o, n in sorted(counts.items()))
        print(f"{name:8} {summary}; time to answer p50 {statistics.median(times):.1f} s, max {max(times):.1f} s")
    print(f"({load()})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="src/ of the tree to compare against")
    parser.add_argument("--after", default=str(HERE / "src"))
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--inspector", type=int, default=5)
    parser.add_argument("--kills", type=int, default=9)
    parser.add_argument("--stops", type=int, default=3)
    parser.add_argument("--parts", default="latency,revision,inspector,kill,stop")
    args = parser.parse_args()
    trees = {"before": args.before, "after": args.after}
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory(prefix="relay-figures-") as tmp:
        work = Path(tmp)
        if "latency" in parts:
            part_latency(trees, work, args.sessions)
        if "revision" in parts:
            part_revision(trees, work)
        if "inspector" in parts:
            part_inspector(trees, work, args.inspector)
        if "kill" in parts:
            part_signal(trees, work, signal.SIGKILL, args.kills, cap=30)
        if "stop" in parts:
            part_signal(trees, work, signal.SIGSTOP, args.stops, cap=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
