"""Spawning and reaping `store_worker.py` children: bounded waits, never a leaked process."""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

WORKER = str(Path(__file__).resolve().with_name("store_worker.py"))
SRC = str(Path(__file__).resolve().parents[2] / "src")


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Worker:
    """One child running `store_worker.py`, its stdout lines delivered through a queue."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, WORKER, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=worker_env(),
            text=True,
            encoding="utf-8",
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr = ""
        self._out = threading.Thread(target=self._pump, daemon=True)
        self._out.start()
        self._err = threading.Thread(target=self._pump_err, daemon=True)
        self._err.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        with self.proc.stderr:
            self.stderr = self.proc.stderr.read()

    def expect(self, wanted: str, timeout: float = 20.0) -> None:
        """Wait for the stdout line `wanted`; fail with the child's stderr otherwise."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {wanted!r} from worker within {timeout} s") from None
            if line == wanted:
                return
            if line is None:
                self.proc.wait(timeout=5)
                self._err.join(timeout=5)
                raise AssertionError(f"worker ended without {wanted!r}: rc={self.proc.returncode}\n{self.stderr}")
            if line.startswith(("OVERLAP", "no-go")):
                raise AssertionError(f"worker said {line!r}")

    def rest(self, timeout: float = 30.0) -> tuple[int, list[str], str]:
        """Wait for the end: (exit code, remaining stdout lines, stderr)."""
        rc = self.proc.wait(timeout=timeout)
        self._out.join(timeout=5)
        self._err.join(timeout=5)
        out: list[str] = []
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                out.append(line)
        return rc, out, self.stderr

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self._out.join(timeout=5)
        self._err.join(timeout=5)


@contextlib.contextmanager
def reaped(workers: list[Worker]) -> Iterator[list[Worker]]:
    """Yield `workers`; on the way out kill and reap any that is still running."""
    try:
        yield workers
    finally:
        for worker in workers:
            with contextlib.suppress(Exception):
                worker.kill()
