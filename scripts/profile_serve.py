#!/usr/bin/env python3
"""Where `serve`'s CPU goes under `scripts/bench.py --serve`'s 16-session load.

    python scripts/profile_serve.py [--size 10000] [--sessions 16] [--per-session 40] [--src OTHER/src] [--top 40]

Generates the bench's store, starts a real `dsh-memory-mcp serve` with a CPU sampler inside it and
drives it with the bench's own load (`bench.serve_load`: official SDK client sessions over Streamable
HTTP, alternating search and save). The sampler reads every thread's run time
(`/proc/self/task/<tid>/schedstat`, Linux) every 2 ms and charges what each thread used since the last sample to
that thread's current Python stack, so it measures CPU time, not wall time (the machine's other load
does not show), across the event loop and the worker threads. Printed: CPU per call by thread kind,
then the functions by self and by inclusive CPU. Also `--mixed`: the bench's 8 hosts relaying to serve.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import pstats
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import anyio  # noqa: E402
import httpx  # noqa: E402

INTERVAL = 0.002


def _where(code: Any) -> str:
    path = code.co_filename
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{code.co_name}"


def _thread_cpu() -> dict[str, float]:
    """CPU seconds so far of each live thread of this process, by thread kind (Linux /proc)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    kinds: dict[str, float] = collections.defaultdict(float)
    for task in Path("/proc/self/task").iterdir():
        try:
            used = int((task / "schedstat").read_bytes().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
        name = names.get(int(task.name), "other")
        kind = "main (event loop)" if name == "MainThread" else name.rstrip("0123456789-_ ").strip() or name
        kinds[kind] += used
    return kinds


def child(out: str, argv: list[str], *, mode: str) -> int:
    """Run `dsh-memory-mcp <argv>` with the CPU sampler; write the samples to `out` at exit."""
    self_cum: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    kinds: dict[str, float] = collections.defaultdict(float)
    last: dict[int, float] = {}
    stop = threading.Event()

    def sample() -> None:
        me = threading.get_ident()
        while not stop.wait(INTERVAL):
            frames = sys._current_frames()
            threads = {t.ident: t for t in threading.enumerate()}
            names = {ident: t.name for ident, t in threads.items()}
            for ident, frame in frames.items():
                if ident == me or ident not in threads:
                    continue
                try:  # the kernel's run time of this thread, in ns
                    with open(f"/proc/self/task/{threads[ident].native_id}/schedstat", "rb") as fh:
                        used = int(fh.read().split()[0]) / 1e9
                except (OSError, ValueError, IndexError):
                    continue
                delta = used - last.get(ident, used)
                last[ident] = used
                if delta <= 0:
                    continue
                name = names.get(ident, "?")
                kind = "main (event loop)" if name == "MainThread" else name.rstrip("0123456789-_ ").strip() or name
                kinds[kind] += delta
                seen: set[str] = set()
                first = True
                f: Any = frame
                while f is not None:
                    key = _where(f.f_code)
                    entry = self_cum[key]
                    if first:
                        entry[0] += delta
                        first = False
                    if key not in seen:
                        entry[1] += delta
                        seen.add(key)
                    f = f.f_back

    # CPU time (time.thread_time), not wall: time spent waiting for the GIL is not the loop's
    profiler = cProfile.Profile(time.thread_time) if mode == "cprofile" else None
    start: dict[str, float] = {}

    def reset(signum: int, frame: Any) -> None:
        self_cum.clear()
        kinds.clear()
        start.clear()
        start.update(_thread_cpu())
        if profiler is not None:
            profiler.enable()  # the event loop's thread, deterministically (the workers are sampled)

    signal.signal(signal.SIGUSR1, reset)
    sampler = threading.Thread(target=sample, name="cpu-sampler", daemon=True)
    if mode != "plain":
        sampler.start()
    from dsh_memory_mcp.cli.main import main

    try:
        code = main(argv)
    finally:
        end = _thread_cpu()  # threads that ended meanwhile are not counted
        if mode == "plain":
            kinds.update({k: v - start.get(k, 0.0) for k, v in end.items()})
        stop.set()
        if sampler.is_alive():
            sampler.join(1)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(out + ".prof")
        Path(out).write_text(
            json.dumps({"functions": dict(self_cum), "threads": dict(kinds), "sampler_cpu": time.thread_time()}),
            encoding="utf-8",
        )
    return int(code or 0)


def report(path: Path, calls: int, top: int) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    total = sum(data["threads"].values())
    print(f"sampled CPU {total * 1000:.0f} ms over {calls} calls = {total * 1000 / max(calls, 1):.2f} ms/call")
    for kind, secs in sorted(data["threads"].items(), key=lambda kv: -kv[1]):
        print(f"  {kind:30s} {secs * 1000 / max(calls, 1):7.2f} ms/call")
    funcs = data["functions"]
    if not funcs:
        return
    for col, title in ((0, "self"), (1, "inclusive")):
        print(f"\nby {title} CPU (ms per call, share of sampled CPU):")
        for name, vals in sorted(funcs.items(), key=lambda kv: -kv[1][col])[:top]:
            print(f"  {vals[col] * 1000 / max(calls, 1):7.3f}  {100 * vals[col] / total:5.1f} %  {name}")


def main() -> int:
    if len(sys.argv) > 3 and sys.argv[1] == "--child":
        return child(sys.argv[3], sys.argv[4:], mode=sys.argv[2])
    # Not imported by the child: bench puts this tree's src/ first on sys.path, and the child must run
    # the tree its PYTHONPATH names (`--src`).
    import bench

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=10000)
    ap.add_argument("--sessions", type=int, default=16)
    ap.add_argument("--per-session", type=int, default=40)
    ap.add_argument("--mixed", action="store_true", help="8 hosts relaying to serve instead of 16 HTTP sessions")
    ap.add_argument("--src", default="", help="the package source tree to measure (default: this tree's src/)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument(
        "--mode",
        choices=("plain", "sample", "cprofile"),
        default="sample",
        help="plain: CPU per thread kind only (no sampler: the figures of an unobserved serve); sample: "
        "the sampler; cprofile: the sampler and cProfile of the event loop's thread (CPU time; slows it)",
    )
    ap.add_argument("--warm", type=float, default=4.0, help="seconds to let serve read the store before the load")
    args = ap.parse_args()
    if args.src:
        bench.SRC = Path(args.src).resolve()
    with tempfile.TemporaryDirectory(prefix="dsh-profserve-") as tmpname:
        tmp = Path(tmpname)
        projects = [tmp / "work" / name for name in ("alpha", "beta", "gamma")]
        for p in projects:
            p.mkdir(parents=True)
        store = tmp / "store"
        bench.generate_store(store, args.size, projects)
        env = bench.clean_env(tmp)
        out = tmp / "samples.json"

        def start_serve(
            store: Path, env: dict[str, str], errlog: Any
        ) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    args.mode,
                    str(out),
                    "serve",
                    "--store-dir",
                    str(store),
                    "--port",
                    "0",
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errlog,
            )
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    info = json.loads((store / "serve.json").read_text(encoding="utf-8"))
                    if info.get("pid") == proc.pid:
                        r = httpx.get(
                            info["url"].rsplit("/mcp", 1)[0] + "/health",
                            headers={"Authorization": f"Bearer {info['token']}"},
                            timeout=2,
                        )
                        if r.status_code == 200:
                            time.sleep(args.warm)  # serve reads the store in the background; not charged
                            proc.send_signal(signal.SIGUSR1)  # the sampler starts over
                            return proc, info
                except (OSError, ValueError, httpx.HTTPError):
                    pass
                time.sleep(0.1)
            proc.kill()
            raise RuntimeError("serve did not start")

        bench.start_serve = start_serve
        with (tmp / "serve-stderr.log").open("w", encoding="utf-8") as errlog:
            if args.mixed:
                row = anyio.run(bench.mixed_hosts, store, projects, env, errlog, 8, args.per_session, "serve")
                print(
                    f"8 hosts via serve: search p50 {row['search_p50_ms']} / p95 {row['search_p95_ms']} ms, save p50 "
                    f"{row['save_p50_ms']} ms, serve CPU {row['cpu_ms_per_call']} ms/call, {row['seconds']} s"
                )
            else:
                row = anyio.run(bench.serve_load, store, projects, env, errlog, args.sessions, args.per_session)
                print(
                    f"{row['sessions']} sessions: {row['calls_per_s']} calls/s, search p50 {row['search_p50_ms']} "
                    f"p99 {row['search_p99_ms']} ms, save p50 {row['save_p50_ms']} p99 {row['save_p99_ms']} ms, "
                    f"serve CPU {row['serve_cpu_ms_per_call']} ms/call, client CPU {row['client_cpu_ms_per_call']} "
                    f"ms/call, errors {row['errors']}"
                )
        if row["errors"]:  # what serve said about them (its stderr and its log file)
            for log in [tmp / "serve-stderr.log", *sorted((tmp / "xdg-state").rglob("*.log"))]:
                text = log.read_text(encoding="utf-8", errors="replace")
                start = text.find("Traceback")
                print(f"--- {log.name}:\n{text[start - 2000 : start + 6000] if start >= 0 else text[-3000:]}")
        report(out, row["calls"], args.top)
        if args.mode != "cprofile":
            return 0
        print("\nthe event loop's thread, cProfile (cumulative):")
        stats = pstats.Stats(str(out) + ".prof")
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
