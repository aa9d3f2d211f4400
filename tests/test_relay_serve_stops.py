"""A relayed call in flight when the real `serve` is SIGKILLed or SIGSTOPped still gets its answer.

The official Python client (both eras) saves through a relay to a real `serve` while another
process holds the scope's lock, so the save is provably still running inside `serve` when the
signal arrives (`/health` says one call is running). The relay must notice — a killed serve ends
the stream, a stopped one stops answering `/health` — fall back to its direct child and send the
save again; the lock is released once the fallback is under way, the save completes exactly once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from dsh_memory_mcp.transports.relay import LIVENESS_AFTER, LIVENESS_EVERY
from tests.helpers.mcp_session import server_params
from tests.helpers.serve_proc import Serve, running_serve
from tests.helpers.store_procs import Worker, reaped

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

#: What noticing a stopped serve costs at most: the wait before the first check, one check period.
STOP_NOTICED = LIVENESS_AFTER + 2 * LIVENESS_EVERY


def _running_calls(serve: Serve) -> int:
    r = httpx.get(f"{serve.base}/health", headers=serve.auth(), timeout=5)
    return int(r.json()["toolCalls"]["running"])


def _records(store_dir: Path) -> list[str]:
    path = store_dir / "global.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["content"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _relayed_save_under(sig: signal.Signals, tmp_path: Path, store_dir: Path, mode: str) -> dict[str, Any]:
    content = f"serve 在调用中途收到 {sig.name}({mode})"
    errlog = tmp_path / "relay.log"
    store_dir.mkdir()
    holder = Worker("hold", str(store_dir), "global")
    with reaped([holder]), running_serve(store_dir, tmp_path / "serve.log") as serve:
        holder.expect("locked")
        try:

            async def main() -> dict[str, Any]:
                with errlog.open("w", encoding="utf-8") as err:
                    async with Client(stdio_client(server_params(store_dir), errlog=err), mode=mode) as client:  # type: ignore[arg-type]
                        out: dict[str, Any] = {}

                        async def save() -> None:
                            out["saved"] = await client.call_tool("memory_save", {"content": content})
                            out["answered_at"] = time.monotonic()

                        async with anyio.create_task_group() as tg:
                            tg.start_soon(save)
                            with anyio.fail_after(30):  # the save is waiting for the lock inside serve
                                while await anyio.to_thread.run_sync(_running_calls, serve) != 1:
                                    await anyio.sleep(0.05)
                            out["signalled_at"] = time.monotonic()
                            serve.proc.send_signal(sig)
                            with anyio.fail_after(60):  # the relay gave up on serve …
                                while "改为直连模式" not in errlog.read_text(encoding="utf-8"):
                                    await anyio.sleep(0.05)
                            out["fell_back_at"] = time.monotonic()
                            holder.kill()  # … so the lock goes and the direct child's save can finish
                        found = await client.call_tool("memory_search", {"query": content})
                        out["found"] = (found.structured_content or {}).get("count")
                        return out

            out = anyio.run(main)
        finally:
            if sig == signal.SIGSTOP and serve.proc.poll() is None:
                serve.proc.send_signal(signal.SIGCONT)
    out["log"] = errlog.read_text(encoding="utf-8")
    out["records"] = _records(store_dir)
    out["content"] = content
    return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_relayed_call_is_answered_by_the_fallback_when_serve_is_sigkilled_under_it(
    tmp_path: Path, store_dir: Path, mode: str
):
    out = _relayed_save_under(signal.SIGKILL, tmp_path, store_dir, mode)
    assert not out["saved"].is_error, out["saved"]
    assert out["fell_back_at"] - out["signalled_at"] < 10, out  # the stream ended: noticed at once
    assert out["found"] == 1
    assert out["records"] == [out["content"]]  # saved once, by the direct child


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_relayed_call_is_answered_by_the_fallback_when_serve_is_sigstopped_under_it(
    tmp_path: Path, store_dir: Path, mode: str
):
    out = _relayed_save_under(signal.SIGSTOP, tmp_path, store_dir, mode)
    assert not out["saved"].is_error, out["saved"]
    # Noticed at the first check, long before serve's 300 s tool deadline (it used to wait 90 s and more).
    assert out["fell_back_at"] - out["signalled_at"] < STOP_NOTICED + 10, out
    assert "已被暂停" in out["log"]
    assert out["found"] == 1
    # serve, resumed and stopped, may also have finished its copy of the save: deduplicated, one record.
    assert out["records"] == [out["content"]]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_stopped_process_is_seen_as_stopped_and_a_running_one_is_not():
    from dsh_memory_mcp.transports.relay import process_stopped

    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert not process_stopped(proc.pid)
        proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not process_stopped(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process_stopped(proc.pid)
        proc.send_signal(signal.SIGCONT)
        while process_stopped(proc.pid) and time.monotonic() < deadline + 10:
            time.sleep(0.01)
        assert not process_stopped(proc.pid)
    finally:
        proc.kill()
        proc.wait(10)
        assert proc.stdin is not None
        proc.stdin.close()
    assert not process_stopped(proc.pid)  # gone
