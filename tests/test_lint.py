"""The tree is clean by its own linters: `ruff check src tests scripts` and `mypy` (strict, as
pyproject.toml configures both) report nothing. A finding fails the suite, so it is fixed where it
is written instead of piling up for the next engineer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=subprocess_env(),
        timeout=600,
    )


def test_ruff_finds_nothing_in_src_tests_and_scripts():
    out = _run("ruff", "check", "--no-cache", "--output-format=concise", "src", "tests", "scripts")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_finds_nothing_in_the_package():
    # `files`, `strict` and the overrides come from [tool.mypy]; no cache, so every run checks everything.
    out = _run("mypy", "--no-incremental", "--cache-dir=/dev/null")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found" in out.stdout
