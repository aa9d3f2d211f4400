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
