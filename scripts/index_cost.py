#!/usr/bin/env python3
"""Lexical index cost of one tree's code: build time and search time over generated memories.

    python scripts/index_cost.py [--src OTHER/src] [--records 20000]

The memories are `scripts/bench.py`'s bilingual generator (same seed); the queries are its
English and Chinese query lists. Prints build seconds, search p50 (ms) and records/s; run it for
two trees back to back (or interleaved) to compare them under the same load.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=str(ROOT / "src"))
    ap.add_argument("--records", type=int, default=20000)
    args = ap.parse_args()
    sys.path[:0] = [args.src, str(ROOT), str(ROOT / "scripts")]
    import bench  # the generator and the query lists

    from dsh_memory_mcp.search import scoring
    from dsh_memory_mcp.store import records

    rng = random.Random(42)
    recs = [
        records.new_record(scope="global", content=bench.make_content(rng), now=1_790_000_000_000 + i)
        for i in range(args.records)
    ]
    t0 = time.perf_counter()
    index = scoring.LexicalIndex.build(recs)
    build = time.perf_counter() - t0

    snap = types.SimpleNamespace(scope="global", records=index.records, cache={"lexical": index})
    index.source = snap.records
    queries = bench.EN_QUERIES + bench.ZH_QUERIES
    times = []
    for q in queries * 3:
        t = time.perf_counter()
        scoring.rank([snap], q, top_k=5, now=1_800_000_000_000)
        times.append(time.perf_counter() - t)
    print(
        f"{args.src}: {args.records} records, build {build:.2f} s ({args.records / build:.0f}/s), "
        f"search p50 {statistics.median(times) * 1000:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
