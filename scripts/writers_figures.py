"""Many writers at a big store: N freshly spawned stdio servers × M saves into one scope at once.

    python scripts/writers_figures.py --trees /work/wt/x-before/src,src --size 100000 --rounds 2

The figure of `scripts/bench.py`'s 16×50 concurrency row, alone and for several source trees
interleaved round by round (the machine's load hits each alike): every round copies one generated
store afresh for each tree, primes it the way the bench's earlier phases do (one server searches
and saves, then exits: the index and digest caches are written), then spawns the writers, waits
until each answered `initialize`, and lets them all save at once. Per tree: acknowledged saves,
refusals by code, lost (acknowledged but not in the file), the slowest save, the slowest *first*
save of a process and the slowest later one, p50. The machine's load average is printed with them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _p in (str(ROOT / "src"), str(ROOT / "scripts"), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import anyio  # noqa: E402
import bench  # noqa: E402
from mcp import ClientSession, stdio_client  # noqa: E402

from dsh_memory_mcp.store import scopes  # noqa: E402


def tree_env(tmp: Path, src: Path) -> dict[str, str]:
    env = bench.clean_env(tmp)
    env["PYTHONPATH"] = str(src)
    return env


async def prime(store: Path, project: Path, env: dict[str, str], errlog: Any) -> None:
    """What the bench's phases before its concurrency row leave behind: caches written at exit."""
    async with stdio_client(bench.params(store, project, env), errlog=errlog) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        bench.structured(await s.call_tool("memory_search", {"query": "部署 pipeline"}))
        bench.structured(await s.call_tool("memory_save", {"content": f"prime {uuid.uuid4().hex}"}))


async def writers(
    store: Path, project: Path, env: dict[str, str], errlog: Any, procs: int, saves: int
) -> dict[str, Any]:
    marker = f"writers-{uuid.uuid4().hex[:8]}"
    ready = anyio.Event()
    go = anyio.Event()
    state = {"ready": 0, "ok": 0}
    failed: dict[str, int] = {}
    times: list[list[float]] = [[] for _ in range(procs)]

    async def worker(k: int) -> None:
        async with stdio_client(bench.params(store, project, env), errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            state["ready"] += 1
            if state["ready"] == procs:
                ready.set()
            await go.wait()
            for i in range(saves):
                t1 = time.perf_counter()
                res = await s.call_tool("memory_save", {"content": f"{marker} p{k} n{i} 并发写入 concurrent save"})
                times[k].append(time.perf_counter() - t1)
                sc = getattr(res, "structured_content", None) or {}
                if sc.get("ok"):
                    state["ok"] += 1
                else:
                    code = str(sc.get("code", "NO_STRUCTURED_CONTENT"))
                    failed[code] = failed.get(code, 0) + 1

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for k in range(procs):
            tg.start_soon(worker, k)
        await ready.wait()
        go.set()
        t_go = time.perf_counter()
    found = bench.count_marked(store, scopes.GLOBAL, marker)
    every = [t for per in times for t in per]
    firsts = [per[0] for per in times if per]
    later = [t for per in times for t in per[1:]]
    return {
        "ok": state["ok"],
        "failed": failed,
        "lost": state["ok"] - found,
        "spawn_s": round(t_go - t0, 2),
        "max_ms": bench.ms(max(every)),
        "first_max_ms": bench.ms(max(firsts)),
        "later_max_ms": bench.ms(max(later)) if later else None,
        "p50_ms": bench.ms(statistics.median(every)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", required=True, help="comma-separated package source trees (src/ dirs)")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--saves", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", dest="json_out", help="write the results here")
    ap.add_argument("--log", help="keep the servers' stderr here")
    args = ap.parse_args(argv)
    trees = [Path(t).resolve() for t in args.trees.split(",") if t]
    tmp = Path(tempfile.mkdtemp(prefix="dsh-writers-"))
    results: dict[str, list[dict[str, Any]]] = {str(t): [] for t in trees}
    try:
        base = tmp / "base"
        projects = [tmp / "work" / name for name in ("alpha", "beta", "gamma")]
        for p in projects:
            p.mkdir(parents=True, exist_ok=True)
        bench.generate_store(base, args.size, projects)
        with Path(args.log or tmp / "stderr.log").open("w", encoding="utf-8") as errlog:
            run_rounds(args, trees, tmp, base, projects, errlog, results)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.procs} writers x {args.saves} saves at {args.size} records")
    for tree, rows in results.items():
        for row in rows:
            print(
                f"{tree}: ok {row['ok']} failed {row['failed'] or 0} lost {row['lost']} slowest {row['max_ms']:.0f} ms "
                f"(first saves {row['first_max_ms']:.0f}, later {row['later_max_ms'] or 0:.0f}) p50 {row['p50_ms']:.1f} ms "
                f"load {row['load_before']}→{row['load_after']}"
            )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


def run_rounds(
    args: argparse.Namespace,
    trees: list[Path],
    tmp: Path,
    base: Path,
    projects: list[Path],
    errlog: Any,
    results: dict[str, list[dict[str, Any]]],
) -> None:
    for rnd in range(args.rounds):
        for tree in trees:
            store = tmp / f"store-{rnd}-{trees.index(tree)}"
            shutil.copytree(base, store)
            env = tree_env(tmp, tree)
            anyio.run(prime, store, projects[0], env, errlog)
            load = os.getloadavg()[0]
            row = anyio.run(writers, store, projects[0], env, errlog, args.procs, args.saves)
            row["load_before"] = round(load, 2)
            row["load_after"] = round(os.getloadavg()[0], 2)
            results[str(tree)].append(row)
            print(f"[writers] round {rnd} {tree}: {json.dumps(row)}", file=sys.stderr, flush=True)
            shutil.rmtree(store, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
