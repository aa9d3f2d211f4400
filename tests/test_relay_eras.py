"""The relay is transparent in both protocol eras, with real clients and a real `serve`.

- A host negotiates the same revision relayed as direct: the official Python SDK client in mode
  `auto` (2026-07-28: `server/discover`, no session) and `legacy` (the `initialize` handshake).
- Handshake era with roots (what IDE hosts do today): `serve` asks for roots right after the
  handshake; the relay carries that `roots/list` to the host and the answer back, so the project
  comes from the host's roots, the first call does not wait out the roots timeout, and the host gets
  no `notifications/cancelled` for a request it never saw.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ListRootsResult, Root

from tests.helpers.mcp_session import server_params
from tests.helpers.raw_host import RawHost
from tests.helpers.serve_proc import running_serve
from tests.helpers.ts_client import drive, stdio_target

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX serve lifecycle"),
]


#: What the first relayed call with roots used to take: the whole roots timeout, then the cwd.
STALL = 5.0


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def run_client(
    params: StdioServerParameters, errlog: Path, *, mode: str, roots: Path | None = None
) -> dict[str, Any]:
    """One session of the official Python client: its revision, a project save, what it was sent."""
    asked: list[float] = []
    notes: list[str] = []

    async def list_roots(_ctx: Any) -> ListRootsResult:
        asked.append(time.perf_counter())
        assert roots is not None
        return ListRootsResult(roots=[Root(uri=roots.as_uri())])

    async def on_message(message: Any) -> None:
        notes.append(str(getattr(message, "method", type(message).__name__)))

    async def main() -> dict[str, Any]:
        with errlog.open("w", encoding="utf-8") as err:
            async with Client(
                stdio_client(params, errlog=err),
                mode=mode,  # type: ignore[arg-type]
                list_roots_callback=list_roots if roots is not None else None,
                message_handler=on_message,
            ) as client:
                start = time.perf_counter()
                saved = await client.call_tool("memory_save", {"content": "两个时代都要经中继保存", "scope": "project"})
                first_call = time.perf_counter() - start
                errors = await client.call_tool("memory_get", {})
                return {
                    "version": client.protocol_version,
                    "saved": saved,
                    "first_call": first_call,
                    "error_code": (errors.structured_content or {}).get("code"),
                }

    out = anyio.run(main)
    out["roots_asked"] = len(asked)
    out["notifications"] = notes
    out["log"] = errlog.read_text(encoding="utf-8")
    return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_host_negotiates_the_same_revision_relayed_as_direct(tmp_path: Path, store_dir: Path, mode: str):
    direct = run_client(server_params(store_dir), tmp_path / "direct.log", mode=mode)
    with running_serve(store_dir, tmp_path / "serve.log"):
        relayed = run_client(server_params(store_dir), tmp_path / "relayed.log", mode=mode)
    assert "连接方式 = direct(" in direct["log"] and "连接方式 = relay(" in relayed["log"]
    assert relayed["version"] == direct["version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    for run in (direct, relayed):
        assert not run["saved"].is_error, _text(run["saved"])
        assert run["error_code"] == "IDS_EMPTY"  # a coded error passes through unchanged
    # No false line: nothing was lost, nothing was re-opened, nothing fell back.
    assert "会话已失效" not in relayed["log"] and "改为直连模式" not in relayed["log"]
    assert "HTTP 400" not in json.dumps(relayed["saved"].model_dump(mode="json"), ensure_ascii=False)


def test_a_relayed_handshake_host_gets_roots_list_and_its_project_comes_from_its_roots(tmp_path: Path, store_dir: Path):
    workspace = tmp_path / "工作区" / "ide-app"
    workspace.mkdir(parents=True)
    with running_serve(store_dir, tmp_path / "serve.log") as serve:
        run = run_client(server_params(store_dir, cwd=tmp_path), tmp_path / "relayed.log", mode="legacy", roots=workspace)
        serve_log = serve.stderr()
    assert "连接方式 = relay(" in run["log"]
    saved = run["saved"]
    assert not saved.is_error, _text(saved)
    assert saved.structured_content["scope"] == f"project:{workspace.as_posix()}"
    assert "[来自 客户端 roots]" in _text(saved)
    assert run["roots_asked"] == 1
    assert "roots/list 失败" not in serve_log  # serve's request was answered, not timed out
    assert run["first_call"] < STALL, run["first_call"]  # it did not wait out a roots timeout
    assert not any("cancel" in note for note in run["notifications"]), run["notifications"]


def test_serves_roots_request_reaches_a_raw_host_and_its_answer_goes_back_with_nothing_stray(
    tmp_path: Path, store_dir: Path
):
    # serve asks for roots after the handshake or on the first call's own stream: either way the
    # request reaches the host, its answer reaches serve, and nothing else arrives.
    workspace = tmp_path / "raw-workspace"
    workspace.mkdir()
    with running_serve(store_dir, tmp_path / "serve.log"), RawHost(store_dir, tmp_path / "relay.log") as host:
        host.initialize({"roots": {"listChanged": True}})
        call = {"content": "原始宿主的项目来自 roots", "scope": "project"}
        host.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "memory_save", "arguments": call}})
        ask = host.wait_for(lambda m: m.get("method") == "roots/list" or m.get("id") == 1, timeout=30)
        assert ask.get("method") == "roots/list", ask  # asked before the save was answered
        host.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": workspace.as_uri()}]}})
        saved = host.wait_for(lambda m: m.get("id") == 1)
        assert host.close() == 0
    assert saved["result"]["structuredContent"]["scope"] == f"project:{workspace.as_posix()}"
    kinds = [m.get("method") or f"answer:{m.get('id')}" for m in host.messages()]
    assert kinds == ["answer:0", "roots/list", "answer:1"]  # no notifications/cancelled, nothing else


def test_the_typescript_sdk_client_relayed_with_roots_saves_to_its_roots_project(tmp_path: Path, store_dir: Path):
    workspace = tmp_path / "ts-workspace"
    workspace.mkdir()
    with running_serve(store_dir, tmp_path / "serve.log") as serve:
        target = stdio_target(store_dir, tmp_path / "relay.log", cwd=tmp_path)
        out = drive(
            target,
            [{"op": "call", "name": "memory_save", "arguments": {"content": "TS 客户端经中继", "scope": "project"}}],
            workdir=tmp_path,
            roots=[{"uri": workspace.as_uri(), "name": "ws"}],
        )
        serve_log = serve.stderr()
    assert "连接方式 = relay(" in (tmp_path / "relay.log").read_text(encoding="utf-8")
    result = out["steps"][0]["result"]
    assert result["structuredContent"]["scope"] == f"project:{workspace.as_posix()}", result
    assert "roots/list 失败" not in serve_log
