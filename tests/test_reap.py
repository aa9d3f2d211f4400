"""A child a test leaves running is stopped when the test ends (tests/helpers/reap.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.helpers.reap import children_reaped


def test_a_child_still_running_at_the_end_is_stopped_and_its_pipes_closed():
    with children_reaped():
        proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(300)"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert proc.poll() is None
    assert proc.returncode is not None
    assert proc.stdin is not None and proc.stdin.closed
    assert proc.stdout is not None and proc.stdout.closed


def test_a_child_that_already_exited_is_left_as_it_was():
    with children_reaped():
        proc = subprocess.Popen([sys.executable, "-c", "pass"], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        proc.stdout.read()
        proc.wait(timeout=60)
    assert proc.returncode == 0 and not proc.stdout.closed
    proc.stdout.close()


INNER_TEST = """
import subprocess, sys, time

def test_times_out():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], stdout=subprocess.PIPE)
    with open({pid_file!r}, "w", encoding="ascii") as f:
        f.write(str(proc.pid))
    time.sleep(300)
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_test_failed_by_pytest_timeout_leaves_no_process(tmp_path):
    # The whole chain, with no pytester: a pytest run whose only test starts a child and then
    # hangs until pytest-timeout fails it; once that run is over, its child is gone.
    pid_file = tmp_path / "pid"
    (tmp_path / "test_inner.py").write_text(INNER_TEST.format(pid_file=str(pid_file)), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.helpers.reap",
            "-p",
            "no:cacheprovider",
            "--timeout",
            "1",  # the inner test needs only to start its child and write the pid before it hangs
            "-W",
            "error",
            str(tmp_path / "test_inner.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    pid = int(pid_file.read_text(encoding="ascii"))
    try:
        assert result.returncode == 1 and "Timeout" in result.stdout, result.stdout + result.stderr
        assert not _running(pid), "the timed-out test's child outlived the run"
        assert "ResourceWarning" not in result.stdout + result.stderr
    finally:
        if _running(pid):
            os.kill(pid, signal.SIGKILL)
