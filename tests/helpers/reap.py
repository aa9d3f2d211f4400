"""Stopping a child a test started: a polite signal, a bounded wait, then SIGKILL — never a leak.

Also a pytest plugin (tests/conftest.py loads it): every `subprocess.Popen` started while a test
runs (its body and its function-scoped fixtures) that is still running when the test ends, e.g.
because pytest-timeout failed it, is stopped and its pipes closed, so no process outlives the test
and no unclosed pipe fails a later test through a ResourceWarning.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

__all__ = ["children_reaped", "stop_process"]

_started: list[list[subprocess.Popen[Any]]] = []
_popen_init = subprocess.Popen.__init__


def _tracking_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
    _popen_init(self, *args, **kwargs)
    for started in _started:
        started.append(self)


subprocess.Popen.__init__ = _tracking_init  # type: ignore[method-assign]


def stop_process(proc: subprocess.Popen[Any], timeout: float = 20.0) -> int:
    """SIGTERM `proc` (unless it has exited), wait `timeout` s, then kill it; its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(timeout=10)


@contextmanager
def children_reaped() -> Iterator[list[subprocess.Popen[Any]]]:
    """Every child started inside that still runs at the end is stopped, its pipes closed."""
    started: list[subprocess.Popen[Any]] = []
    _started.append(started)
    try:
        yield started
    finally:
        _started.remove(started)
        for proc in started:
            if proc.poll() is None:
                stop_process(proc, timeout=5)
                for stream in (proc.stdin, proc.stdout, proc.stderr):
                    if stream is not None:
                        stream.close()


@pytest.fixture(autouse=True)
def _reap_children() -> Iterator[None]:
    with children_reaped():
        yield
