#!/usr/bin/env python3
"""Per-search CPU of the lexical search, in process, for several source trees side by side.

    python scripts/bench_scoring.py [--sizes 10000 50000 100000] [--tree NAME=SRC ...] [--rounds 2]

Generates `scripts/bench.py`'s bilingual store for each size (half the records in global, the
rest in three projects), then, interleaved round by round so the machine's load hits every tree
alike, runs a fresh process per tree on its own copy of the store: `compose.open_service` with
vectors off, one warm-up search (it builds the indexes), then

* ``search``: the bench's English and Chinese queries, `memory_search` from a project (its scope
  and global), CPU time per search;
* ``after save``: `memory_save` then `memory_search`, alternating (each search sees a scope that
  just grew by one record, as a host does under the mixed load), CPU per search only.

Prints p50 and mean CPU ms per search for each tree and size: the calling thread's CPU
(`time.thread_time`), so a server's background warm-up still indexing other scopes is not counted,
measured once numpy is imported where a tree imports it on a thread (until then its loops answer). By default the trees are this one,
`/work/main/src` and the 11f31c0 tree at `/work/wt/stores-before/src` when they exist.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TREES = {"11f31c0": "/work/wt/stores-before/src", "main": "/work/main/src", "this": str(ROOT / "src")}

CHILD = r"""
import json, os, random, sys, time
sys.path[:0] = [sys.argv[1], sys.argv[4]]
from dsh_memory_mcp.config import resolve_settings
from dsh_memory_mcp.service import compose
from dsh_memory_mcp.service.context import CallContext
import dsh_memory_mcp
import bench  # after the tree's package: bench puts its own tree's src first for what it imports later
assert os.path.realpath(dsh_memory_mcp.__file__).startswith(os.path.realpath(sys.argv[1])), dsh_memory_mcp.__file__

store, project, searches = sys.argv[2], sys.argv[3], int(sys.argv[5])
settings = resolve_settings(store_dir=store, env={"DSH_MEMORY_VECTOR": "off"}, cwd=project)
service = compose.open_service(settings)
ctx = CallContext(project_dir=project, project_source="flag")
queries = bench.EN_QUERIES + bench.ZH_QUERIES
service.call("memory_search", {"query": "warm up 预热"}, ctx)
for q in queries:  # every query once: the stem memo and the columns are warm
    service.call("memory_search", {"query": q}, ctx)
from dsh_memory_mcp.search import scoring
for _ in range(1000):  # a tree that imports numpy on a thread: measure once it is there
    if getattr(scoring, "_NUMPY", False) is not None:
        break
    time.sleep(0.01)
search = []
for i in range(searches):
    t = time.thread_time()
    service.call("memory_search", {"query": queries[i % len(queries)]}, ctx)
    search.append(time.thread_time() - t)
rng = random.Random(7)
after = []
for i in range(searches // 2):
    service.call("memory_save", {"content": f"bench-scoring {i} {bench.make_content(rng)}"}, ctx)
    t = time.thread_time()
    service.call("memory_search", {"query": queries[(3 * i) % len(queries)]}, ctx)
    after.append(time.thread_time() - t)
compose.close_service(service)
print(json.dumps({"search": search, "after": after}))
"""


def run_child(src: str, store: Path, project: Path, searches: int) -> dict[str, list[float]]:
    env = {**os.environ, "PYTHONPATH": src, "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-c", CHILD, src, str(store), str(project), str(ROOT / "scripts"), str(searches)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, encoding="utf-8", check=False, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{src}: {done.stderr[-2000:]}")
    out: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    ap.add_argument("--tree", action="append", default=[], help="NAME=SRC (repeatable); default: this, main, 11f31c0")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--searches", type=int, default=150)
    args = ap.parse_args()
    trees = (
        dict(t.split("=", 1) for t in args.tree)
        if args.tree
        else {name: src for name, src in DEFAULT_TREES.items() if Path(src).is_dir()}
    )
    sys.path[:0] = [str(ROOT / "src"), str(ROOT / "scripts")]
    import bench

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average {load:.2f}; CPU ms per search (thread_time), p50 / mean")
    tmp = Path(tempfile.mkdtemp(prefix="dsh-bench-scoring-"))
    results: dict[str, Any] = {}
    try:
        for size in args.sizes:
            base = tmp / f"s{size}"
            projects = [base / "work" / name for name in ("alpha", "beta", "gamma")]
            for p in projects:
                p.mkdir(parents=True)
            bench.generate_store(base / "store", size, projects)
            samples: dict[str, dict[str, list[float]]] = {name: {"search": [], "after": []} for name in trees}
            for _ in range(args.rounds):
                for name, src in trees.items():
                    copy = base / f"store-{name}"
                    shutil.rmtree(copy, ignore_errors=True)
                    shutil.copytree(base / "store", copy)
                    got = run_child(src, copy, projects[0], args.searches)
                    for key in ("search", "after"):
                        samples[name][key].extend(got[key])
                    shutil.rmtree(copy, ignore_errors=True)
            for name in trees:
                row = {
                    key: (statistics.median(v) * 1000, statistics.fmean(v) * 1000) for key, v in samples[name].items()
                }
                results[f"{size}/{name}"] = row
                print(
                    f"  {size:>7} {name:<10} search {row['search'][0]:6.2f} / {row['search'][1]:6.2f}"
                    f"   after save {row['after'][0]:6.2f} / {row['after'][1]:6.2f}"
                )
            shutil.rmtree(base, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
