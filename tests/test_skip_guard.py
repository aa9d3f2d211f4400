"""The skip guard: under CI a skipped test fails the run; locally a skip stays a skip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import subprocess_env

REPO = Path(__file__).resolve().parent.parent

SKIPPING = '''
import pytest

def test_runs():
    assert True

def test_is_skipped():
    pytest.skip("deliberately skipped for the guard's test")
'''

PASSING = '''
def test_runs():
    assert True
'''


def _run(tmp_path: Path, body: str, ci: str) -> subprocess.CompletedProcess[str]:
    test_file = tmp_path / "test_guard_probe.py"
    test_file.write_text(body, encoding="utf-8")
    env = subprocess_env(CI=ci)
    env["PYTHONPATH"] = str(REPO) + ":" + env["PYTHONPATH"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.helpers.skip_guard", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", "/dev/null", str(test_file)],
        cwd=tmp_path, env=env, capture_output=True, text=True, encoding="utf-8", timeout=120,
    )


def test_a_deliberately_skipped_test_fails_the_run_under_ci(tmp_path: Path) -> None:
    proc = _run(tmp_path, SKIPPING, ci="true")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "skip guard: 1 test(s) skipped under CI" in proc.stdout
    assert "test_guard_probe.py::test_is_skipped" in proc.stdout
    assert "deliberately skipped" in proc.stdout


def test_the_same_skip_outside_ci_leaves_the_run_green(tmp_path: Path) -> None:
    proc = _run(tmp_path, SKIPPING, ci="")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 skipped" in proc.stdout and "skip guard" not in proc.stdout


def test_a_run_without_skips_is_green_under_ci(tmp_path: Path) -> None:
    proc = _run(tmp_path, PASSING, ci="true")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "skip guard" not in proc.stdout
