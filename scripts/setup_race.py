"""How many of a host's edits `setup` loses while the host rewrites its config, and how often it says ✅.

    python scripts/setup_race.py [--runs 30] [--interval-ms 3] [--mode inplace|rename|both] [--src DIR ...]

A writer process (`tests/helpers/config_writer.py`) rewrites a fake ``~/.claude.json`` every
INTERVAL ms, adding one entry each time (in place like Claude Code, or by rename); meanwhile
``setup claude-code`` and ``setup claude-code --remove`` run RUNS times in turn. Reported per
source tree (each ``--src`` is put first on PYTHONPATH; several trees are measured interleaved, run
by run, so the machine's load hits them alike): entries the host wrote, entries lost, runs that
said ✅, and ✅ runs whose change was not in the file right after (read back at once).

The windows that remain (no check can close them without the host's cooperation) are printed for
the current tree from `hostwrite`'s own steps, timed in-process on the same file: check → swap,
and swap → the inspection of the replaced file (which decides a swap-back).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _env(src: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
    env.update(
        PYTHONPATH=src,
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_STATE_HOME=str(home / ".state"),
        DSH_MEMORY_STORE_DIR=str(home / "store"),
        DSH_MEMORY_VECTOR="off",
    )
    return env


def measure(srcs: list[str], runs: int, interval_ms: float, mode: str) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as box:
        root = Path(box)
        homes = {src: root / f"home{i}" for i, src in enumerate(srcs)}
        writers = {}
        for src, home in homes.items():
            home.mkdir()
            doc = {"numStartups": 1, "mcpServers": {"github": {"command": "npx"}}, "projects": {}}
            (home / ".claude.json").write_text(json.dumps(doc, indent=2), encoding="utf-8")
            writers[src] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.helpers.config_writer",
                    str(home / ".claude.json"),
                    mode,
                    str(interval_ms),
                    str(home / "stop"),
                ],
                stdout=subprocess.PIPE,
                text=True, encoding="utf-8",
                cwd=str(ROOT),
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
        stats = {src: {"ok": 0, "ok_but_gone": 0, "other": 0, "seconds": 0.0} for src in srcs}
        try:
            for i in range(runs):
                for src, home in homes.items():
                    args = ["setup", "claude-code"] + ([] if i % 2 == 0 else ["--remove"])
                    started = time.monotonic()
                    done = subprocess.run(
                        [sys.executable, "-m", "dsh_memory_mcp", *args],
                        capture_output=True,
                        text=True,
                        encoding="utf-8",
                        env=_env(src, home),
                        timeout=120,
                    )
                    after = (home / ".claude.json").read_text(encoding="utf-8")
                    stats[src]["seconds"] += time.monotonic() - started
                    line = next((x for x in done.stdout.splitlines() if "Claude Code" in x), "")
                    if line.startswith("✅"):
                        stats[src]["ok"] += 1
                        try:
                            present = "dsh-memory" in json.loads(after).get("mcpServers", {})
                        except ValueError:
                            present = None
                        if present is not (i % 2 == 0):
                            stats[src]["ok_but_gone"] += 1
                    elif not line.startswith("="):
                        stats[src]["other"] += 1
        finally:
            for home in homes.values():
                (home / "stop").touch()
        out: dict[str, dict[str, float]] = {}
        for src, writer in writers.items():
            written = int(writer.communicate(timeout=60)[0].strip())
            doc = json.loads((homes[src] / ".claude.json").read_text(encoding="utf-8"))
            lost = sum(1 for n in range(written) if f"/p/{n}" not in doc["projects"])
            out[src] = {"written": written, "lost": lost, **stats[src]}
        return out


def windows(samples: int = 2000) -> dict[str, float]:
    """Microseconds of check → swap and swap → inspected, on this machine (the current tree)."""
    sys.path.insert(0, str(ROOT / "src"))
    from dsh_memory_mcp.cli import hostwrite
    from dsh_memory_mcp.store import fileio

    check_to_swap: list[float] = []
    swap_to_inspected: list[float] = []
    with tempfile.TemporaryDirectory() as box:
        path = os.path.join(box, "c.json")
        Path(path).write_bytes(b"{}" * 500)
        for _ in range(samples):
            expected = hostwrite.read_snapshot(path)
            fd, tmp = fileio.new_tmp(path)
            os.write(fd, b"[]" * 500)
            os.close(fd)
            t0 = time.perf_counter()
            now = hostwrite.read_snapshot(path)
            assert expected is not None and expected.same_version(now)
            t1 = time.perf_counter()
            if not hostwrite.exchange(tmp, path):
                os.replace(tmp, path)
                check_to_swap.append((time.perf_counter() - t1) * 1e6)
                continue
            t2 = time.perf_counter()
            hostwrite.read_snapshot(tmp)
            t3 = time.perf_counter()
            os.unlink(tmp)
            check_to_swap.append((t2 - t1) * 1e6)
            swap_to_inspected.append((t3 - t2) * 1e6)
            del t0
    result = {"check_to_swap_p50_us": statistics.median(check_to_swap)}
    result["check_to_swap_p99_us"] = sorted(check_to_swap)[int(len(check_to_swap) * 0.99)]
    if swap_to_inspected:
        result["swap_to_inspected_p50_us"] = statistics.median(swap_to_inspected)
        result["swap_to_inspected_p99_us"] = sorted(swap_to_inspected)[int(len(swap_to_inspected) * 0.99)]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--interval-ms", type=float, default=3.0)
    parser.add_argument("--mode", choices=["inplace", "rename", "both"], default="both")
    parser.add_argument("--src", action="append", help="a source tree's src/ (default: this one)")
    ns = parser.parse_args()
    srcs = [os.path.abspath(s) for s in ns.src or [str(ROOT / "src")]]
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)" if hasattr(os, "getloadavg") else "load: ?")
    for mode in ["inplace", "rename"] if ns.mode == "both" else [ns.mode]:
        for src, row in measure(srcs, ns.runs, ns.interval_ms, mode).items():
            print(
                f"{mode:8} {src}: host wrote {row['written']:.0f}, lost {row['lost']:.0f}; "
                f"✅ {row['ok']:.0f}/{ns.runs} (gone right after: {row['ok_but_gone']:.0f}), "
                f"⚠️/❌ {row['other']:.0f}; {row['seconds'] / ns.runs:.2f} s per run"
            )
    for key, value in windows().items():
        print(f"{key}: {value:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
