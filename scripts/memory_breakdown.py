"""What a big store costs in memory, part by part: RSS after each step of opening it in one process.

    python scripts/memory_breakdown.py --size 100000 [--src OTHER/src]

Generates the bench's bilingual store (`scripts/bench.py`'s generator, half the records in global)
in a temporary directory, then in a fresh process: imports the server's modules, parses every
scope file, builds the id index, the content index (dedupe) and the lexical index of each, and
prints the RSS growth of each step (`/proc/self/status`, after a full collection), in MB and in
bytes per record. Linux only.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def measure(store: Path) -> None:
    gc.collect()
    steps: list[tuple[str, int]] = [("python", rss_kb())]
    from dsh_memory_mcp.search import scoring
    from dsh_memory_mcp.store import records, snapshots
    from dsh_memory_mcp.store.shared import SharedStore
    from dsh_memory_mcp.transports import mcp_server  # noqa: F401  (the server's imports, the SDK included)

    gc.collect()
    steps.append(("imports (SDK included)", rss_kb()))
    s = SharedStore(str(store))
    files = sorted(store.rglob("*.jsonl"))
    snaps = [s.snapshot(key) for key in s.discover_scopes()]
    n = sum(len(snap.records) for snap in snaps)
    gc.collect()
    steps.append(("parsed records", rss_kb()))
    for snap in snaps:
        snapshots.id_index(snap)
    gc.collect()
    steps.append(("id indexes", rss_kb()))
    for snap in snaps:
        snapshots.content_index(snap)
    gc.collect()
    steps.append(("content indexes (dedupe)", rss_kb()))
    for snap in snaps:
        scoring.index_for(snap)
    gc.collect()
    steps.append(("lexical indexes", rss_kb()))
    # What searching adds: numpy and the per-record columns (`index_for` above already made them).
    for snap in snaps:
        scoring.rank([snap], "deploy pipeline 部署流水线", top_k=5, now=records.now_ms())
    gc.collect()
    steps.append(("numpy, a search of each scope", rss_kb()))
    size = sum(f.stat().st_size for f in files)
    print(f"{n} records in {len(files)} files, {size / 1e6:.1f} MB on disk")
    for (_, before), (name, after) in itertools.pairwise(steps):
        per = "" if name.startswith("imports") else f"  {(after - before) * 1024 / n:7.0f} B/record"
        print(f"  {name:<26} +{(after - before) / 1024:7.1f} MB{per}")
    print(f"  {'total RSS':<26} {steps[-1][1] / 1024:8.1f} MB")
    s.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--src", default=str(ROOT / "src"), help="the package source tree to measure")
    ap.add_argument("--store", default="", help=argparse.SUPPRESS)  # the child's
    args = ap.parse_args()
    if args.store:
        sys.path.insert(0, args.src)
        measure(Path(args.store))
        return 0
    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(0, str(ROOT / "src"))
    import bench

    tmp = Path(tempfile.mkdtemp(prefix="dsh-mem-"))
    try:
        projects = [tmp / "work" / name for name in ("alpha", "beta", "gamma")]
        for p in projects:
            p.mkdir(parents=True)
        bench.generate_store(tmp / "store", args.size, projects)
        env = {**os.environ, "PYTHONPATH": args.src, "DSH_MEMORY_VECTOR": "off", "PYTHONDONTWRITEBYTECODE": "1"}
        cmd = [sys.executable, __file__, "--src", args.src, "--store", str(tmp / "store")]
        return subprocess.run(cmd, env=env, check=False).returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
