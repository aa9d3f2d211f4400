#!/usr/bin/env python3
"""What a host gets, per path and protocol era, measured with the official Python SDK client.

    python scripts/bench_eras.py [--sessions 20] [--tree before=/path/to/old/checkout] [--json out.json]

For each tree (this checkout, plus any `--tree NAME=DIR` — e.g. a worktree of an older commit, run
with `PYTHONPATH=DIR/src`), each path — `direct` (a stdio server, `--no-relay`), `relayed` (a plain
stdio start relayed to a live `serve` on the same store) and `http` (the client straight to
`serve` with the bearer token) — and each era — `auto` (`mcp.Client` mode `auto`: 2026-07-28 when
the server speaks it) and `legacy` (mode `legacy`: the `initialize` handshake) — it opens
`--sessions` sessions, each declaring MCP roots that name a project directory, and records:

* the protocol revision negotiated;
* whether the memory digest arrived in `instructions` (a standing global rule is seeded);
* the project source named by the first save's answer (`[来自 客户端 roots]` is the goal);
* the first call's latency (a `memory_save` with `scope: project`, the first call that needs the
  project), p50 and max over the sessions.

Trees are interleaved session by session so the machine's load hits them alike; the 1-minute load
average is recorded before and after. `--spawn-per-call N` adds what a host that spawns one process
per call pays (langchain-mcp-adapters' default, llama-index's BasicMCPClient): N spawns, each doing
connect + one search + exit, direct and relayed, interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.types import ListRootsResult, Root  # noqa: E402

DIGEST_MARK = "用户的长期记忆摘要"
SOURCE = re.compile(r"\[来自 ([^\]]+)\]")
PATHS = ("direct", "relayed", "http")
ERAS = ("auto", "legacy")


@dataclass
class Tree:
    name: str
    root: Path
    store: Path
    project: Path
    cwd: Path
    serve: subprocess.Popen[str] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
        env["PYTHONPATH"] = str(self.root / "src")
        env["PYTHONUNBUFFERED"] = "1"
        env["DSH_MEMORY_VECTOR"] = "off"
        env["XDG_STATE_HOME"] = str(self.store.parent / "xdg-state")
        env.update(extra)
        return env

    def stdio(self, *args: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=["-m", "dsh_memory_mcp", "--store-dir", str(self.store), *args],
            env=self.env(),
            cwd=str(self.cwd),
        )


def seed(tree: Tree) -> None:
    tree.store.mkdir(parents=True, exist_ok=True)
    line = {
        "id": "5b0e6a3c-1f2d-4c7e-9a8b-0d1e2f3a4b5c",
        "scope": "global",
        "kind": "rule",
        "content": "提交前必须跑 make check",
        "tags": [],
        "source": {"origin": "explicit"},
        "createdAt": 1792403053326,
        "updatedAt": 1792403053326,
        "lastAccessedAt": 1792403053326,
        "accessCount": 0,
        "importance": 0.9,
    }
    (tree.store / "global.jsonl").write_text(json.dumps(line, ensure_ascii=False) + "\n", encoding="utf-8")


def start_serve(tree: Tree, errlog: Path) -> None:
    err = errlog.open("w", encoding="utf-8")
    tree.serve = subprocess.Popen(
        [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(tree.store), "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=err,
        env=tree.env(),
        cwd=str(tree.cwd),
        text=True,
        encoding="utf-8",
    )
    err.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if tree.serve.poll() is not None:
            raise SystemExit(f"serve of {tree.name} exited:\n{errlog.read_text(encoding='utf-8')}")
        try:
            info = json.loads((tree.store / "serve.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = {}
        if info.get("pid") == tree.serve.pid:
            tree.info = info
            return
        time.sleep(0.05)
    raise SystemExit(f"serve of {tree.name} did not start")


def stop_serve(tree: Tree) -> None:
    if tree.serve is not None and tree.serve.poll() is None:
        tree.serve.send_signal(signal.SIGTERM)
        try:
            tree.serve.wait(timeout=20)
        except subprocess.TimeoutExpired:
            tree.serve.kill()
            tree.serve.wait(timeout=10)


def roots_for(project: Path) -> Any:
    async def list_roots(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=project.as_uri(), name="workspace")])

    return list_roots


async def one_session(tree: Tree, path: str, era: str, errlog: Any, index: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        if path == "http":
            auth = {"Authorization": f"Bearer {tree.info['token']}"}
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=auth, timeout=60))
            transport: Any = streamable_http_client(tree.info["url"], http_client=http)
        else:
            # stdio: the child's stderr goes to our log file, not the terminal
            transport = stdio_client(tree.stdio("--no-relay") if path == "direct" else tree.stdio(), errlog=errlog)
        client = Client(transport, mode=era, list_roots_callback=roots_for(tree.project), read_timeout_seconds=30)
        await stack.enter_async_context(client)
        out["revision"] = client.protocol_version
        out["digest"] = DIGEST_MARK in (client.instructions or "")
        t0 = time.perf_counter()
        saved = await client.call_tool(
            "memory_save", {"content": f"{tree.name} {path} {era} 第 {index} 次会话", "scope": "project"}
        )
        out["first_call_ms"] = (time.perf_counter() - t0) * 1000
        text = "".join(getattr(b, "text", "") for b in saved.content)
        found = SOURCE.findall(text)
        out["source"] = found[-1] if found else ("ERROR " + text[:80] if saved.is_error else "?")
    return out


async def spawn_per_call(tree: Tree, relayed: bool, errlog: Any) -> float:
    params = tree.stdio() if relayed else tree.stdio("--no-relay")
    t0 = time.perf_counter()
    async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
        await client.call_tool("memory_search", {"query": "make check"})
    return (time.perf_counter() - t0) * 1000


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    lat = sorted(r["first_call_ms"] for r in rows)
    revisions = sorted({r["revision"] for r in rows})
    sources = sorted({r["source"] for r in rows})
    return {
        "revision": revisions[0] if len(revisions) == 1 else revisions,
        "digest": f"{sum(r['digest'] for r in rows)}/{len(rows)}",
        "source": sources[0] if len(sources) == 1 else sources,
        "first_call_p50_ms": round(statistics.median(lat), 1),
        "first_call_max_ms": round(lat[-1], 1),
    }


def load() -> float:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


async def run(args: argparse.Namespace, trees: list[Tree], logdir: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"load_before": load(), "sessions": args.sessions, "trees": {}}
    rows: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    with (logdir / "clients.log").open("w", encoding="utf-8") as errlog:
        for path in PATHS:
            for era in ERAS:
                for i in range(args.sessions):
                    for tree in trees:
                        try:
                            row = await one_session(tree, path, era, errlog, i)
                        except Exception as exc:  # a failed session is a figure too
                            row = {"revision": "FAILED", "digest": False, "source": type(exc).__name__}
                            row["first_call_ms"] = float("nan")
                        rows.setdefault((tree.name, path, era), []).append(row)
                for tree in trees:
                    summary = summarise(rows[(tree.name, path, era)])
                    results["trees"].setdefault(tree.name, {}).setdefault(path, {})[era] = summary
                    print(f"{tree.name:>8} {path:>8} {era:>6}: {json.dumps(summary, ensure_ascii=False)}", flush=True)
        if args.spawn_per_call:
            spawn: dict[str, dict[str, list[float]]] = {}
            for _ in range(args.spawn_per_call):
                for tree in trees:
                    for relayed in (False, True):
                        ms = await spawn_per_call(tree, relayed, errlog)
                        spawn.setdefault(tree.name, {}).setdefault("relayed" if relayed else "direct", []).append(ms)
            for name, by in spawn.items():
                results["trees"][name]["spawn_per_call"] = {
                    k: {"total_ms": round(sum(v), 1), "p50_ms": round(statistics.median(v), 1)} for k, v in by.items()
                }
                print(f"{name:>8} spawn-per-call x{args.spawn_per_call}: {results['trees'][name]['spawn_per_call']}")
    results["load_after"] = load()
    return results


def main(argv: list[str] | None = None) -> int:
    warnings.simplefilter("ignore")  # roots are deprecated in 2026-07-28; today's hosts use them
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=20, help="sessions per tree, path and era")
    ap.add_argument("--tree", action="append", default=[], help="NAME=DIR: also measure the checkout in DIR")
    ap.add_argument("--spawn-per-call", type=int, default=0, help="also time N spawn-connect-call-exit cycles")
    ap.add_argument("--json", dest="json_out", help="write the results as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (stores, logs)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="dsh-eras-"))
    trees: list[Tree] = []
    for spec in ["this=" + str(ROOT), *args.tree]:
        name, _, where = spec.partition("=")
        base = tmp / name
        tree = Tree(name, Path(where).resolve(), base / "store", base / "项目 app", base / "cwd")
        tree.project.mkdir(parents=True)
        tree.cwd.mkdir(parents=True)
        seed(tree)
        trees.append(tree)
    try:
        for tree in trees:
            start_serve(tree, tmp / f"serve-{tree.name}.log")
        results = anyio.run(run, args, trees, tmp)
    finally:
        for tree in trees:
            stop_serve(tree)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
