"""`serve_http` called more than once in one process (an embedding program, a test runner).

The signal that stopped the first serve is noted by serve's quiet handlers (uvicorn re-raises it
after its shutdown); it must not be taken by the second serve as "asked to stop while starting".
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import subprocess_env

_TWICE = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time

    import httpx

    from dsh_memory_mcp import config
    from dsh_memory_mcp.transports import http

    store = sys.argv[1]
    settings = config.resolve_settings(store_dir=store)
    serve = config.resolve_serve_settings(port=0)

    def stop_once_it_answers(run, done):
        # Polls serve.json and /health until this run answers, then asks it to stop like a user would.
        while not done.is_set():
            try:
                with open(os.path.join(store, "serve.json"), encoding="utf-8") as f:
                    info = json.load(f)
            except (OSError, ValueError):
                info = None
            if info and info["pid"] == os.getpid():
                base = info["url"].rsplit("/mcp", 1)[0]
                try:
                    r = httpx.get(base + "/health", headers={"Authorization": "Bearer " + info["token"]}, timeout=5)
                    ok = r.status_code == 200 and r.json()["ok"] is True
                except httpx.HTTPError:
                    ok = False
                if ok:
                    print(f"run {run} answered /health", flush=True)
                    os.kill(os.getpid(), signal.SIGTERM)
                    return
            done.wait(0.05)

    for run in (1, 2):
        done = threading.Event()
        watcher = threading.Thread(target=stop_once_it_answers, args=(run, done), daemon=True)
        watcher.start()
        http.serve_http(settings, serve)
        done.set()
        watcher.join(10)
        print(f"run {run} returned", flush=True)
    """
)


def test_a_second_serve_in_the_same_process_serves_until_its_own_signal(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", _TWICE, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=subprocess_env(),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    # Before the fix the second run saw the first run's SIGTERM and returned without serving.
    assert out.stdout.splitlines() == [
        "run 1 answered /health",
        "run 1 returned",
        "run 2 answered /health",
        "run 2 returned",
    ], out.stderr
