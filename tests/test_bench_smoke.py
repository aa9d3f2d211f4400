"""The benchmark script runs end to end over real stdio and loses no concurrent save."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parent.parent

SIZE_KEYS = {
    "size",
    "bytes",
    "read_once_ms",
    "cold_start_ms",
    "cold_start_ratio",
    "search_p50_ms",
    "search_p95_ms",
    "search_ratio",
    "save_p50_ms",
    "save_p95_ms",
    "save_ratio",
    "cold_search_ms",
    "cold_read",
    "list_p50_ms",
    "get_p50_ms",
    "peak_rss_kb",
    "concurrency",
    "hybrid",
    "first_search",
    "relay_first_search",
    "save_counters",
}


@pytest.mark.slow
def test_the_quick_benchmark_runs_and_loses_no_concurrent_save(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("DSH_MEMORY_")}
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench.py"),
            *("--sizes", "1000", "--quick", "--json", str(out), "--svg", str(tmp_path / "curve.svg")),
        ],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True, encoding="utf-8",
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with capsys.disabled():  # CI's log shows the figures (nothing about them is asserted)
        print("\n" + proc.stdout)
    result = json.loads(out.read_text(encoding="utf-8"))
    assert {"meta", "floors", "sizes"} <= result.keys()
    assert {"python_bare_ms", "sdk_import_ms", "sdk_import_net_ms"} <= result["floors"].keys()
    [row] = result["sizes"]
    assert row.keys() >= SIZE_KEYS
    assert row["size"] == 1000
    assert [c["procs"] for c in row["concurrency"]] == [1, 4]
    assert row["cold_read"]["records"] == 667  # 1k: half in global, a sixth in the searched project
    svg = (tmp_path / "curve.svg").read_text(encoding="utf-8")
    assert svg.startswith("<svg") and "save p50" in svg and svg.count("<circle") >= 4
    for conc in row["concurrency"]:
        assert conc["lost"] == 0, conc
        assert conc["lock_timeouts"] == 0, conc
        assert conc["found"] == conc["expected"] <= conc["attempted"] == conc["procs"] * conc["saves_per_proc"]
    if sys.platform.startswith("linux") and os.path.isdir("/proc"):
        assert row["peak_rss_kb"]
    first = row["first_search"]
    for case in ("cached_now", "cached_after2s", "cold_now", "cold_after2s"):
        assert first[case].keys() == {"initialize_ms", "search_ms", "total_ms"}, first
    assert row["relay_first_search"].keys() == {"first_host", "second_host"}
    work = row["save_counters"]  # what 20 saves cost the store: nothing over every record
    assert work["loss_checks_incremental"] >= 20, work
    assert [work[k] for k in ("loss_checks_full", "parses", "id_index_builds", "content_index_builds")] == [0] * 4


def _bench(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("DSH_MEMORY_")}
    env["TMPDIR"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench.py"), *args],
        env=env,
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
    )


@pytest.mark.slow
def test_the_before_after_mode_measures_both_trees_direct_and_through_serve(tmp_path: Path) -> None:
    """`--before OLD/src`: the closing figures of two trees, one job after the other; here both trees
    are this one, so every figure exists on both sides and each ratio is one's own after ÷ before."""
    out = tmp_path / "pairs.json"
    proc = _bench(
        tmp_path,
        "--before",
        str(ROOT / "src"),
        "--sizes",
        "1000",
        "--serve",
        "1000",
        "--quick",
        "--json",
        str(out),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text(encoding="utf-8"))
    got = {(f["path"], f["figure"]): f for f in result["figures"]}
    direct = ("read_once_ms", "save_p50_ms", "search_p50_ms", "first_search_ms", "rss_mb")
    assert {("direct", k) for k in direct} | {("serve", k) for k in (*direct, "first_search_warm_ms")} <= got.keys()
    for figure in got.values():
        assert figure["size"] == 1000
        assert figure["before"] > 0 and figure["after"] > 0, figure
        assert figure["ratio"] == round(figure["after"] / figure["before"], 3)
    floors = got[("direct", "read_once_ms")]
    assert got[("direct", "save_p50_ms")]["over_floor"]["after"] == round(
        got[("direct", "save_p50_ms")]["after"] / floors["after"], 3
    )
    assert [len(result["runs"][k][t]) for k in ("direct-1000", "serve-1000") for t in ("before", "after")] == [1] * 4
    assert "first_search_ms" in proc.stdout and "→" in proc.stdout


@pytest.mark.slow
def test_the_serve_profile_charges_cpu_to_serves_threads_and_functions(tmp_path: Path) -> None:
    proc = _bench(tmp_path, "--profile", "1000", "--quick", "--top", "5", timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "errors {}" in proc.stdout
    assert "main (event loop)" in proc.stdout
    assert "by self CPU" in proc.stdout and "by inclusive CPU" in proc.stdout
    # the sampled stacks are serve's own (its entry frames; which of them a short sample reaches varies)
    assert "dsh_memory_mcp/cli/serve.py:" in proc.stdout or "dsh_memory_mcp/cli/main.py:main" in proc.stdout
