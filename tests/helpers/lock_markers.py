"""Lock markers as other writers leave them: planted files, marker bytes, a dead pid.

The lock tests plant what another process (this host's or another's, alive or dead) would have
left at a lock path, then watch what a `LockManager` does with it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["HOST", "dead_pid", "marker", "now_ms", "plant"]

HOST = socket.gethostname()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def plant(path: Path, content: bytes, *, age: float = 0.0) -> None:
    """A marker left by someone else; `age` seconds old by mtime."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    if age:
        past = time.time() - age
        os.utime(path, (past, past))


def marker(pid: int, host: str = HOST, created_ms: int | None = None) -> bytes:
    """The bytes of a marker held by `pid` on `host`, created at `created_ms` (default now)."""
    data = {"pid": pid, "host": host, "createdAt": now_ms() if created_ms is None else created_ms}
    return json.dumps(data, separators=(",", ":")).encode()
