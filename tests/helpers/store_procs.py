"""Spawning and reaping `store_worker.py` children: bounded waits, never a leaked process."""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import subprocess_env

WORKER = str(Path(__file__).resolve().with_name("store_worker.py"))
STALL_WORKER = str(Path(__file__).resolve().with_name("lock_stall_worker.py"))


def worker_env() -> dict[str, str]:
    """A worker's environment: this one, with the tree's src importable (as for `python -m dsh_memory_mcp`)."""
    return subprocess_env()


class Worker:
    """One child running `script` (`store_worker.py`), its stdout lines delivered through a queue."""

    def __init__(self, *args: str, script: str = WORKER) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, script, *args],
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

    def next(self, timeout: float = 30.0) -> str:
        """The next stdout line; fail with the child's stderr if it ends first."""
        line = self.lines.get(timeout=timeout)
        if line is None:
            self.proc.wait(timeout=5)
            self._err.join(timeout=5)
            raise AssertionError(f"child ended early: rc={self.proc.returncode}\n{self.stderr}")
        return line

    def until(self, last: str, timeout: float = 60.0) -> list[str]:
        """The stdout lines before the line `last`."""
        out: list[str] = []
        while (line := self.next(timeout)) != last:
            out.append(line)
        return out

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


class StallWorker(Worker):
    """A child running `lock_stall_worker.py` (stalled holders, savers, the soak's writers)."""

    def __init__(self, *args: str) -> None:
        super().__init__(*args, script=STALL_WORKER)


@contextlib.contextmanager
def reaped(workers: list[Worker]) -> Iterator[list[Worker]]:
    """Yield `workers`; on the way out kill and reap any that is still running."""
    try:
        yield workers
    finally:
        for worker in workers:
            with contextlib.suppress(Exception):
                worker.kill()
