"""A stand-in llama-server *executable* for lifecycle tests, and process helpers.

`make_stand_in(dir)` writes an executable shell script that `exec`s ``fake_llama.py`` with the
same Python that runs the tests, so the pid the lifecycle manager spawns is the stand-in's own
pid. The stand-in parses llama-server's flags, records its argv and pid as JSON lines in
``$FAKE_LLAMA_ARGV_FILE``, binds the port (rc 1 when taken), answers /health 503 then 200 and
exits on SIGTERM.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

FAKE_LLAMA = Path(__file__).with_name("fake_llama.py")


def make_stand_in(directory: Path, name: str = "llama-server") -> Path:
    """An executable `directory/name` that behaves like llama-server (POSIX shells only)."""
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / name
    exe.write_text(
        f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE_LLAMA))} "$@"\n',
        encoding="utf-8",
    )
    exe.chmod(0o755)
    return exe


def read_spawns(argv_file: Path) -> list[dict[str, Any]]:
    """Every start of the stand-in: ``{"pid": …, "argv": [...]}``, in order."""
    if not argv_file.exists():
        return []
    return [json.loads(line) for line in argv_file.read_text(encoding="utf-8").splitlines() if line]


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie (dead, not yet reaped by a non-reaping init) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return True  # no /proc (macOS): kill(0) said it exists
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return not pid_alive(pid)


def kill_quietly(pid: int | None) -> None:
    """SIGKILL `pid` if it still runs (test clean-up of processes we did not spawn directly)."""
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
