#!/usr/bin/env python3
"""Per-line JSON parsing of a big scope: `json.JSONDecoder().raw_decode` against the C scanner.

    python scripts/json_line_parse.py [--records 50000] [--rounds 7] [--src OTHER/src ...]

Generates one scope file of `--records` memories (`scripts/bench.py`'s bilingual generator, same
seed) and times, interleaved round by round so the machine's load hits all alike:

* ``scanner``: ``json.scanner.make_scanner(decoder)(line, 0)`` per line (the private C scanner);
* ``raw_decode``: ``decoder.raw_decode(line)`` per line (the public API, one Python frame more);
* ``parse_lines[<src>]``: `store.records.parse_lines` of each tree given with `--src` (run in a
  child process per tree and round, so two versions of the package never meet).

Prints the median and the best round of each, in ms, and each one's ratio to ``scanner``.
"""

from __future__ import annotations

import argparse
import json
import json.scanner
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from dsh_memory_mcp.store import records
text = open(sys.argv[2], encoding="utf-8").read()
t0 = time.perf_counter()
lines = records.parse_lines(text)
took = time.perf_counter() - t0
assert sum(isinstance(x, records.Record) for x in lines) == int(sys.argv[3])
print(took)
"""


def scope_text(n: int) -> str:
    sys.path[:0] = [str(ROOT / "src"), str(ROOT / "scripts")]
    import bench

    from dsh_memory_mcp.store import records

    rng = random.Random(42)
    return "".join(
        records.new_record(scope="global", content=bench.make_content(rng), now=1_790_000_000_000 + i).raw + "\n"
        for i in range(n)
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--src", action="append", default=[])
    args = ap.parse_args()
    text = scope_text(args.records)
    lines = text.split("\n")[:-1]
    decoder = json.JSONDecoder()
    scan = json.scanner.make_scanner(decoder)  # type: ignore[attr-defined]
    raw_decode = decoder.raw_decode

    def by_scanner() -> None:
        for line in lines:
            scan(line, 0)

    def by_raw_decode() -> None:
        for line in lines:
            raw_decode(line)

    times: dict[str, list[float]] = {"scanner": [], "raw_decode": []}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "global.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        for _ in range(args.rounds):
            for name, fn in (("scanner", by_scanner), ("raw_decode", by_raw_decode)):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
            for src in args.src:
                out = subprocess.run(
                    [sys.executable, "-c", _CHILD, src, path, str(args.records)],
                    capture_output=True,
                    text=True,
                    encoding="utf-8",
                    check=True,
                )
                times.setdefault(f"parse_lines[{src}]", []).append(float(out.stdout))
    floor = statistics.median(times["scanner"])
    print(f"{args.records} records, {len(text) / 1e6:.1f} MB, {args.rounds} rounds (load {os.getloadavg()[0]:.1f})")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:>40}: median {med * 1000:7.1f} ms, best {min(values) * 1000:7.1f} ms, ×{med / floor:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
