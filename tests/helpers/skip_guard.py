"""A pytest plugin: under CI, a skipped test fails the run unless it is on `ALLOWED_SKIPS`.

A skip passes silently in a green run, so a wrong fixture path or a leftover marker can turn off a whole
file without anyone noticing. In CI (`require.in_ci()`) every skip is listed at the end of the run and,
when any is not allowed here, the run's exit status becomes "tests failed".
Loaded by `tests/conftest.py` (`pytest_plugins`); `tests/test_skip_guard.py` proves it in a subprocess run.
"""

from __future__ import annotations

import pytest

from tests.helpers.require import in_ci

# nodeid (or its prefix) → why skipping it in CI is legitimate. Keep it short; every entry is a test CI
# cannot run on its Linux machine for a reason that is not a setup mistake.
ALLOWED_SKIPS: dict[str, str] = {
    "tests/test_setup_races.py::test_setup_run_by_another_user_on_a_file_it_does_not_own_refuses_and_writes_nothing": (
        "runs setup as another uid, which needs an interpreter and temp dir that uid can reach; CI's venv and "
        "checkout live under /root (0700). The root-side ownership test beside it runs."
    ),
    "tests/test_serve_edge.py::test_a_session_answers_only_the_peer_that_opened_it": (
        "needs a second, non-loopback address of this machine to be another peer from; a CI machine without a "
        "network interface has none, and loopback alone cannot play a second peer."
    ),
}

_skipped: list[tuple[str, str]] = []


def _allowed(nodeid: str) -> bool:
    return any(nodeid == key or nodeid.startswith((key + "[", key + "::")) for key in ALLOWED_SKIPS)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, str(reason)))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # A module-level `pytest.skip(allow_module_level=True)` or `pytestmark = skipif(...)` skips at collection.
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append((report.nodeid, str(reason)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not in_ci():
        return
    unexpected = [(nodeid, why) for nodeid, why in _skipped if not _allowed(nodeid)]
    if not unexpected:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"skip guard: {len(unexpected)} test(s) skipped under CI and not in tests/helpers/skip_guard.py:ALLOWED_SKIPS"]
    lines += [f"  SKIPPED {nodeid}: {why}" for nodeid, why in unexpected]
    if reporter is not None:
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line, red=True)
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
