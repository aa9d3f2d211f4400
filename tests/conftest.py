"""Shared fixtures: every test gets its own store directory and a clean environment.

Tests never touch a real store: `DSH_MEMORY_STORE_DIR` points at a temp dir and every other
`DSH_MEMORY_*` variable is removed, so a developer's own configuration cannot leak in.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

# Imported once before any test: the product imports numpy on a thread of its own (`search.scoring`,
# the vector channel), and `pytest.approx` peeks at `sys.modules` and fails on a half-imported numpy.
import numpy  # noqa: F401
import pytest

from dsh_memory_mcp import config
from dsh_memory_mcp.store.shared import SharedStore

# Under CI a skipped test fails the run unless it is allowed there (tests/helpers/skip_guard.py).
# Children a test leaves running (a timed-out test) are stopped at its end (tests/helpers/reap.py).
pytest_plugins = ["tests.helpers.skip_guard", "tests.helpers.reap"]

SRC = str(Path(__file__).resolve().parent.parent / "src")


def pytest_configure(config: pytest.Config) -> None:
    """Children start with the default SIGINT disposition even when the suite itself was started
    with SIGINT ignored (`nohup … &` from a non-interactive shell): an ignored signal is inherited
    across exec, a Python handler is not. The server keeps an inherited SIG_IGN on purpose (the
    parent asked for it); the tests that send SIGINT test a server started the usual way."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile the package and the test helpers once, before any test spawns a process.

    The suite starts hundreds of server and helper processes. Where `PYTHONDONTWRITEBYTECODE` is set
    (it is in CI's environment) none of them writes the `.pyc` files of an editable checkout, so each
    would compile ~20k lines again: ~0.3 s of CPU per spawn on a 2-core machine. The bytecode is
    checked against the sources' mtimes as usual, so an edited file is compiled afresh.
    """
    import compileall

    root = Path(SRC).parent
    for folder in (Path(SRC), root / "tests" / "helpers", root / "scripts"):
        compileall.compile_dir(str(folder), quiet=2)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Captured output and logs with lone surrogates (the tests feed the store bytes that are not
    UTF-8, and its warnings quote them) escaped: pytest-xdist sends each report to the controller as
    UTF-8 and would otherwise crash the worker (an INTERNALERROR) on a test that passed."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    report.sections = [(title, _utf8(text)) for title, text in report.sections]


def _utf8(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("DSH_MEMORY_"):
            monkeypatch.delenv(name, raising=False)
    for name in config.HOST_WORKSPACE_VARIABLES:  # a suite run inside a host must not take its workspace
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DSH_MEMORY_STORE_DIR", str(tmp_path / "store"))
    # Vectors are off unless a test turns them on: no test may reach for a port by accident.
    monkeypatch.setenv("DSH_MEMORY_VECTOR", "off")
    # Logs of spawned servers go to a temp dir, not the developer's real log dir.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    # The human CLI speaks English under an en* locale (config.ui_language); the suite asserts the
    # default (Chinese) texts whatever the runner's locale. English tests set LANG themselves.
    for name in ("LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    if (os.environ.get("LANG") or "").lower().startswith("en"):
        monkeypatch.setenv("LANG", "C.UTF-8")
    yield


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    """The (not yet created) store directory of this test."""
    return tmp_path / "store"


@pytest.fixture
def store(store_dir: Path) -> Iterator[SharedStore]:
    """A prepared `SharedStore` on this test's store directory, closed (touches flushed) after."""
    s = SharedStore(str(store_dir))
    s.prepare()
    try:
        yield s
    finally:
        s.close()


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a spawned `python -m dsh_memory_mcp`: this one, with src importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


PYTHON = sys.executable
