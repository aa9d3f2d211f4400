"""The README's two commands are the ones CI runs, so the docs cannot drift from CI."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    match = re.search(r"^TEST_COMMAND='(.*)'$", ci, flags=re.M)
    assert match, ".ci/run must define TEST_COMMAND"
    assert match.group(1) in _readme_blocks()


def test_the_readme_states_an_install_and_run_command():
    assert any("pip install ." in b and "dsh-memory-mcp --store-dir" in b for b in _readme_blocks())
