"""Start a real server process that serves the web page, for the web tests; stop it after.

`running_web` yields a `WebServer` (base URL, token, login URL, store dir). The process is a real
subprocess on loopback, reaped in ``finally``.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import subprocess_env

HELPER = Path(__file__).resolve().parent / "web_app.py"
START_SECONDS = 30


@dataclass(frozen=True)
class WebServer:
    base: str
    token: str
    store_dir: Path
    stderr: Path
    proc: subprocess.Popen[str]

    @property
    def login_url(self) -> str:
        return f"{self.base}/?token={self.token}"


def _env(token: str, logs: Path, extra: dict[str, str]) -> dict[str, str]:
    # Module-scoped servers start before the per-test env isolation: strip DSH_MEMORY_* here too.
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("DSH_MEMORY_")}
    env.update(DSH_MEMORY_TOKEN=token, DSH_MEMORY_VECTOR="off", XDG_STATE_HOME=str(logs / "xdg-state"))
    env.update(extra)
    return env


@contextlib.contextmanager
def running_web(store_dir: Path, logs: Path, *args: str, **env: str) -> Iterator[WebServer]:
    token = secrets.token_urlsafe(24)
    store_dir.mkdir(parents=True, exist_ok=True)
    errpath = logs / "web-server.stderr"
    with errpath.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [sys.executable, str(HELPER), "--store-dir", str(store_dir), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            encoding="utf-8",
            env=_env(token, logs, env),
        )
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + START_SECONDS
            line = proc.stdout.readline()
            match = re.fullmatch(r"PORT=(\d+)\n", line)
            assert match, f"web server did not start: {line!r}\n{errpath.read_text(encoding='utf-8')}"
            assert time.monotonic() < deadline
            yield WebServer(f"http://127.0.0.1:{match.group(1)}", token, store_dir, errpath, proc)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
