"""Run `scripts/bench.py` on two source trees, alternating size by size, and print the figures side by side.

    python scripts/bench_before_after.py --before /work/wt/x-before/src --sizes 1000,100000 --serve 10000 --out DIR

For each size (then for `--serve`) the bench runs once on the "before" tree (`bench.py --src`) and
right after on this tree, so the machine's load hits both alike; each run's JSON and the load
average around it go to `--out`. The table is the store-size figures (save p50, 16 writers × 50,
first search after spawn and 2 s after `initialize` next to the read+parse floor, peak RSS) and
`serve`'s (16 sessions, 8 hosts mixed save/search direct and through serve), before → after.
`--table-only` prints the table from the JSON files already in `--out`; `--readme` also prints this\ntree's per-size tables in the form the README's performance section has them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "scripts" / "bench.py"


def run(tree: str, src: str | None, args: list[str], out: Path) -> None:
    cmd = [sys.executable, str(BENCH), *args, "--json", str(out / f"{tree}.json")]
    if src:
        cmd += ["--src", src]
    load = os.getloadavg()[0]
    print(f"[pairs] {tree}: {' '.join(args)} (load {load:.2f})", file=sys.stderr, flush=True)
    with (out / f"{tree}.log").open("w", encoding="utf-8") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    (out / f"{tree}.load").write_text(f"{load:.2f} {os.getloadavg()[0]:.2f} exit={code}\n", encoding="utf-8")


def _get(data: Any, *path: Any) -> Any:
    for key in path:
        if data is None:
            return None
        if isinstance(key, int) and isinstance(data, list):
            data = next((c for c in data if c.get("procs") == key), None)
        else:
            data = data.get(key) if isinstance(data, dict) else None
    return data


def figures(out: Path, tree: str) -> dict[str, Any]:
    got: dict[str, Any] = {}
    for f in sorted(out.glob(f"{tree}-*.json")):
        result = json.loads(f.read_text(encoding="utf-8"))
        load = (out / f.name.replace(".json", ".load")).read_text(encoding="utf-8").split()[:2]
        for row in result["sizes"]:
            k = f"{row['size'] // 1000}k"
            fs = row.get("first_search") or {}
            c16 = _get(row, "concurrency", 16)
            got[f"load {k}"] = "→".join(load)
            got[f"save p50 {k} ms"] = row["save_p50_ms"]
            got[f"read+parse floor {k} ms"] = row["read_once_ms"]
            spawn_floor = (fs.get("empty_store") or {}).get("total_ms")
            if spawn_floor is not None:
                got[f"spawn floor (empty store) {k} ms"] = spawn_floor
            for case in ("cached", "cold"):
                if f"{case}_now" in fs and spawn_floor is not None:
                    extra = fs[f"{case}_now"]["total_ms"] - spawn_floor
                    got[f"first search {k} {case} minus spawn floor ms (×floor)"] = (
                        f"{extra:.0f} (×{extra / row['read_once_ms']:.2f})"
                    )
                if f"{case}_now" in fs:
                    got[f"first search {k} {case} ms (×floor)"] = (
                        f"{fs[f'{case}_now']['total_ms']:.0f} (×{fs[f'{case}_now']['total_ms'] / row['read_once_ms']:.2f})"
                    )
                    got[f"search 2 s after init {k} {case} ms"] = fs[f"{case}_after2s"]["search_ms"]
            got[f"peak RSS {k} MB"] = round(row["peak_rss_kb"] / 1024, 1) if row.get("peak_rss_kb") else None
            if c16:
                got[f"16×50 {k} ok/LOCK_TIMEOUT/lost/slowest ms"] = (
                    f"{c16['expected']}/{c16['lock_timeouts']}/{c16['lost']}/{c16['save_max_ms']:.0f}"
                )
        serve = result.get("serve")
        if serve:
            got["load serve"] = "→".join(load)
            got["serve 16 sessions calls/s"] = serve["calls_per_s"]
            got["serve 16 sessions p99 ms (search/save)"] = f"{serve['search_p99_ms']:.0f}/{serve['save_p99_ms']:.0f}"
            for via in ("in_process", "direct", "serve"):
                m = _get(serve, "mixed", via)
                if m:
                    got[f"8 hosts mixed {via}: search p50/p95, save p50 ms"] = (
                        f"{m['search_p50_ms']:.1f}/{m['search_p95_ms']:.1f}, {m['save_p50_ms']:.1f}"
                    )
    return got


def table(out: Path) -> None:
    before, after = figures(out, "before"), figures(out, "after")
    width = max((len(k) for k in {**before, **after}), default=10)
    for key in dict.fromkeys([*before, *after]):
        print(f"{key:<{width}}  {before.get(key)!s:>24}  →  {after.get(key)!s}")


def _rows(out: Path, tree: str) -> list[dict[str, Any]]:
    rows = []
    for f in out.glob(f"{tree}-size*.json"):
        rows += json.loads(f.read_text(encoding="utf-8"))["sizes"]
    return sorted(rows, key=lambda r: r["size"])


def readme(out: Path) -> None:
    """This tree's per-size tables as the README's performance section has them (Markdown)."""
    print(
        "| 记录数 | 文件 | 读+解析一遍 | 首次检索 | 检索 p50 / p95(× 读一遍) | 保存 p50 / p95(× 读一遍) | list / get p50 | 峰值 RSS |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in _rows(out, "after"):
        print(
            f"| {r['size']:,} | {r['bytes'] / 1e6:.1f} MB | {r['read_once_ms']:.0f} ms | {r['cold_search_ms'] / 1000:.2f} s"
            f" | {r['search_p50_ms']:.1f} / {r['search_p95_ms']:.1f} ms({r['search_ratio']:.3f}×)"
            f" | {r['save_p50_ms']:.1f} / {r['save_p95_ms']:.1f} ms({r['save_ratio']:.3f}×)"
            f" | {r['list_p50_ms']:.1f} / {r['get_p50_ms']:.1f} ms | {r['peak_rss_kb'] / 1024:.0f} MB |".replace(
                ",", " "
            )
        )
    print()
    print("| 记录数 | 1 进程 × 50 | 4 × 50 | 16 × 50 | 16 × 50 的 `LOCK_TIMEOUT` | 16 × 50 最慢一次保存 |")
    print("|---|---|---|---|---|---|")
    for r in _rows(out, "after"):
        c = {c["procs"]: c for c in r["concurrency"]}
        print(
            f"| {r['size']:,} | {c[1]['seconds']:.1f} s | {c[4]['seconds']:.1f} s | {c[16]['seconds']:.1f} s"
            f" | {c[16]['lock_timeouts']} | {c[16]['save_max_ms'] / 1000:.2f} s |".replace(",", " ")
        )
    print()
    for r in _rows(out, "after"):
        cr = r["cold_read"]
        print(
            f"cold read {r['size']}: {cr['records']} records, read {cr['read_ms']:.1f} ms, decode {cr['decode_ms']:.0f} ms,"
            f" parse {cr['parse_ms']:.0f} ms, lexical index {cr['index_ms']:.0f} ms"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="the before tree's src/")
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--serve", type=int, default=0, help="also the serve bench at this size")
    ap.add_argument("--out", required=True)
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--readme", action="store_true", help="print this tree's tables in the README's form too")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        jobs = [[f"size{s}", ["--sizes", s]] for s in args.sizes.split(",") if s]
        if args.serve:
            jobs.append([f"serve{args.serve}", ["--sizes", "", "--serve", str(args.serve)]])
        for name, bench_args in jobs:
            run(f"before-{name}", args.before, bench_args, out)
            run(f"after-{name}", None, bench_args, out)
    table(out)
    if args.readme:
        readme(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
