"""Stopping a child a test started: a polite signal, a bounded wait, then SIGKILL — never a leak."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["stop_process"]


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20.0) -> int:
    """SIGTERM `proc` (unless it has exited), wait `timeout` s, then kill it; its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(timeout=10)
