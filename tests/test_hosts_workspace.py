"""What a host sees without asking: tools that stay loaded where a host defers MCP tools, and the
project a call means when no roots decide it (the host's workspace variable, roots asked only when
a call needs them, a client that refuses roots, HTTP clients that share a connection pool).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import ErrorData, Implementation, ListRootsResult, Root

from dsh_memory_mcp import config
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.transports.mcp_server import MemoryServer
from tests.helpers.mcp_session import server_params, stdio_session
from tests.helpers.raw_host import RawHost
from tests.helpers.require import require
from tests.helpers.serve_proc import Serve, running_serve, sse_result


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    out = {name: tmp_path / name for name in ("cwd", "app", "other", "flag")}
    for path in out.values():
        path.mkdir()
    return out


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_search_and_save_stay_loaded_where_a_host_defers_tools(store_dir, dirs, mode):
    settings = config.resolve_settings(store_dir=str(store_dir), cwd=str(dirs["cwd"]), env={"DSH_MEMORY_VECTOR": "off"})
    service = open_service(settings)
    server = MemoryServer(service)

    async def main() -> Any:
        async with Client(server.server, mode=mode) as client:
            return await client.list_tools()

    try:
        listed = anyio.run(main)
    finally:
        close_service(service)
    metas = {tool.name: (tool.meta or {}) for tool in listed.tools}
    wire = {tool.name: tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools}
    assert wire["memory_search"]["_meta"] == {"anthropic/alwaysLoad": True}
    assert wire["memory_save"]["_meta"] == {"anthropic/alwaysLoad": True}
    # The others stay deferrable: they are what a search result or a person leads to.
    assert all("anthropic/alwaysLoad" not in metas[name] for name in ("memory_list", "memory_get", "memory_forget"))


# -- the project without roots ---------------------------------------------------------------------


def _roots(path: Path) -> Any:
    async def answer(context: Any) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=path.as_uri(), name="ws")])

    return answer


def test_claude_project_dir_decides_the_project_when_no_roots_do(tmp_path, store_dir, dirs):
    params = server_params(store_dir, cwd=dirs["cwd"], CLAUDE_PROJECT_DIR=str(dirs["app"]))
    with stdio_session(params, tmp_path / "err.log") as s:
        saved = s.call("memory_save", {"content": "宿主给的工作区", "scope": "project"})
    assert saved.structured_content["scope"] == f"project:{dirs['app']}"
    assert saved.content[0].text.endswith("[来自 宿主的工作区变量]")


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_the_host_variable_wins_over_roots_and_dsh_memory_project_over_it(tmp_path, store_dir, dirs):
    asked = []

    async def roots(context: Any) -> ListRootsResult:
        asked.append(1)
        return ListRootsResult(roots=[Root(uri=dirs["other"].as_uri(), name="ws")])

    host = server_params(store_dir, cwd=dirs["cwd"], CLAUDE_PROJECT_DIR=str(dirs["app"]))
    with stdio_session(host, tmp_path / "a.log", list_roots_callback=roots) as s:
        by_host = s.call("memory_save", {"content": "变量胜过 roots", "scope": "project"})
    assert by_host.structured_content["scope"] == f"project:{dirs['app']}" and not asked
    both = server_params(
        store_dir, cwd=dirs["cwd"], CLAUDE_PROJECT_DIR=str(dirs["app"]), DSH_MEMORY_PROJECT=str(dirs["flag"])
    )
    with stdio_session(both, tmp_path / "b.log") as s:
        by_env = s.call("memory_save", {"content": "DSH_MEMORY_PROJECT 胜过宿主变量", "scope": "project"})
    assert by_env.structured_content["scope"] == f"project:{dirs['flag']}"


def test_config_reads_the_host_variable_below_the_flag_and_dsh_memory_project(tmp_path):
    env = {"CLAUDE_PROJECT_DIR": "/w/app"}
    assert config.resolve_settings(env=env, cwd="/c").project_dir == "/w/app"
    assert config.resolve_settings(env=env, cwd="/c").project_source == "host"
    assert config.resolve_settings(env=env | {"DSH_MEMORY_PROJECT": "/w/env"}, cwd="/c").project_source == "env"
    assert config.resolve_settings(project_dir="/w/f", env=env, cwd="/c").project_source == "flag"
    assert config.resolve_settings(env={"CLAUDE_PROJECT_DIR": "  "}, cwd="/c").project_source == "cwd"


def test_roots_are_asked_when_a_call_needs_the_project_not_after_the_handshake(tmp_path, store_dir, dirs):
    # An mcp 1.x client that declares roots and closes right after initialize crashed in its own
    # reader on a roots/list it no longer read: nothing may come from the server until a call.
    with RawHost(store_dir, tmp_path / "err.log") as host:
        host.initialize({"roots": {}})
        host.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        host.wait_for(lambda m: m.get("id") == 1)
        host.send({"jsonrpc": "2.0", "id": 2, "method": "prompts/list"})
        host.wait_for(lambda m: m.get("id") == 2)
        assert [m for m in host.messages() if "method" in m] == []  # no request, no notification yet
        call = {"name": "memory_save", "arguments": {"content": "要项目的调用", "scope": "project"}}
        host.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
        ask = host.wait_for(lambda m: m.get("method") == "roots/list")
        host.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": dirs["app"].as_uri()}]}})
        saved = host.wait_for(lambda m: m.get("id") == 3)
    assert saved["result"]["structuredContent"]["scope"] == f"project:{dirs['app']}"


def test_a_handshake_client_that_closes_right_after_initialize_leaves_a_quiet_server(tmp_path, store_dir):
    for i in range(5):
        with RawHost(store_dir, tmp_path / f"err{i}.log") as host:
            host.initialize({"roots": {}})
        assert host.proc.returncode == 0
        assert "Traceback" not in host.stderr()
        assert [m for m in host.messages() if "method" in m] == []


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_a_2026_client_that_refuses_roots_falls_back_to_the_working_directory(tmp_path, store_dir, dirs):
    async def refuse(context: Any) -> ErrorData:
        return ErrorData(code=-32601, message="host refuses roots")

    async def main() -> list[Any]:
        out: list[Any] = []
        with (tmp_path / "client.log").open("w", encoding="utf-8") as log:
            params = server_params(store_dir, cwd=dirs["cwd"])
            async with Client(stdio_client(params, errlog=log), mode="auto", list_roots_callback=refuse) as client:
                for i in range(4):
                    try:
                        out.append(await client.call_tool("memory_save", {"content": f"拒绝 {i}", "scope": "project"}))
                    except MCPError as exc:
                        out.append(exc)
        return out

    results = anyio.run(main)
    # The client's SDK fails the call it refused the roots for; every later call is answered.
    answered = [r for r in results if not isinstance(r, MCPError)]
    assert len(answered) >= 3, results
    assert all(r.structured_content["scope"] == f"project:{dirs['cwd']}" for r in answered)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_two_http_clients_sharing_one_pool_and_client_info_keep_their_own_projects(tmp_path, store_dir, dirs):
    info = Implementation(name="pooled", version="1")  # the same clientInfo, one connection pool

    async def main(serve: Serve) -> list[Any]:
        out: list[Any] = []
        limits = httpx2.Limits(max_connections=1)  # every request of both clients on one connection
        auth = {"Authorization": f"Bearer {serve.token}"}
        async with (
            httpx2.AsyncClient(headers=auth, timeout=60, limits=limits) as http,
            Client(
                streamable_http_client(serve.url, http_client=http),
                list_roots_callback=_roots(dirs["app"]),
                client_info=info,
            ) as a,
            Client(
                streamable_http_client(serve.url, http_client=http),
                list_roots_callback=_roots(dirs["other"]),
                client_info=info,
            ) as b,
        ):
            assert a.protocol_version == b.protocol_version == "2026-07-28"
            for i in range(3):
                out.append(("a", await a.call_tool("memory_save", {"content": f"A 的记忆 {i}", "scope": "project"})))
                out.append(("b", await b.call_tool("memory_save", {"content": f"B 的记忆 {i}", "scope": "project"})))
        return out

    with running_serve(store_dir, tmp_path / "serve.log") as serve:
        results = anyio.run(main, serve)
    want = {"a": f"project:{dirs['app']}", "b": f"project:{dirs['other']}"}
    assert [(who, r.structured_content["scope"]) for who, r in results] == [(who, want[who]) for who, _ in results]


# -- defects ------------------------------------------------------------------------------------


def test_a_client_info_without_version_is_accepted_in_both_eras(tmp_path, store_dir):
    modern_meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "no-version-host"},
    }
    with RawHost(store_dir, tmp_path / "a.log", "--no-relay") as host:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "no-version-host"}}
        host.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert "result" in host.wait_for(lambda m: m.get("id") == 0)
        host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        save = {"name": "memory_save", "arguments": {"content": "没有版本号的客户端"}}
        host.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": save})
        saved = host.wait_for(lambda m: m.get("id") == 1)
    assert saved["result"]["structuredContent"]["ok"] is True
    with RawHost(store_dir, tmp_path / "b.log", "--no-relay") as host:
        host.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": modern_meta}})
        listed = host.wait_for(lambda m: m.get("id") == 2)
    assert [t["name"] for t in listed["result"]["tools"]][:2] == ["memory_save", "memory_search"]
    with running_serve(store_dir, tmp_path / "serve.log") as serve, httpx.Client(timeout=20) as http:
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": modern_meta}}
        headers = serve.auth(**{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
        answer = sse_result(http.post(serve.url, json=body, headers=headers))
    assert "result" in answer, answer


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_handshake_http_sessions_that_declare_roots_and_close_at_once_leave_no_traceback(tmp_path, store_dir, dirs):
    async def slow_roots(context: Any) -> ListRootsResult:
        await anyio.sleep(0.3)
        return ListRootsResult(roots=[Root(uri=dirs["app"].as_uri(), name="ws")])

    async def main(serve: Serve) -> None:
        auth = {"Authorization": f"Bearer {serve.token}"}
        for i in range(20):
            async with httpx2.AsyncClient(headers=auth, timeout=60) as http:
                transport = streamable_http_client(serve.url, http_client=http)
                async with Client(transport, mode="legacy", list_roots_callback=slow_roots) as client:
                    if i % 2:  # half of them close with a call waiting for its roots
                        with anyio.move_on_after(0.05):
                            await client.call_tool("memory_list", {})

    with running_serve(store_dir, tmp_path / "serve.log") as serve:
        anyio.run(main, serve)
        time.sleep(1.0)  # what a closing session would print comes after its last answer
        err = serve.stderr()
    assert "Traceback" not in err and "Unexpected ASGI message" not in err, err[-3000:]


def test_the_sdk_traceback_of_an_already_closed_session_is_dropped_even_inside_an_exception_group():
    """The SDK's task group wraps the closed-session error ("SSE response error"); any other error stays."""
    import logging

    import dsh_memory_mcp.transports.http  # noqa: F401  (installs the filter on the SDK's logger)

    sdk = logging.getLogger("mcp.server.streamable_http")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    sdk.addHandler(handler)
    try:
        for name, exc in (
            ("bare", anyio.ClosedResourceError()),
            ("grouped", BaseExceptionGroup("tg", [anyio.ClosedResourceError()])),
            ("nested", BaseExceptionGroup("tg", [BaseExceptionGroup("in", [anyio.BrokenResourceError()])])),
            ("other", BaseExceptionGroup("tg", [ValueError("real bug")])),
            ("mixed", BaseExceptionGroup("tg", [anyio.ClosedResourceError(), ValueError("real bug")])),
            ("plain", ValueError("real bug")),
        ):
            try:
                raise exc
            except BaseException:
                sdk.error(name, exc_info=True)
    finally:
        sdk.removeHandler(handler)
    assert seen == ["other", "mixed", "plain"]


def test_server_json_is_registry_metadata_for_this_package():
    import base64
    import tomllib

    root = Path(__file__).resolve().parents[1]
    doc = json.loads((root / "server.json").read_text(encoding="utf-8"))
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert doc["$schema"].startswith("https://static.modelcontextprotocol.io/schemas/")
    namespace, _, server = doc["name"].partition("/")
    assert namespace.startswith("io.github.") and server == project["name"] and "/" not in server
    assert len(doc["description"]) <= 100  # the official registry's limit
    [package] = doc["packages"]
    assert package["registryType"] == "pypi" and package["identifier"] == project["name"]
    assert package["version"] == doc["version"] == project["version"]  # an exact release, the one built
    assert package["transport"] == {"type": "stdio"}
    known = {var.name for var in config.VARIABLES}
    assert {v["name"] for v in package["environmentVariables"]} <= known
    [icon] = doc["icons"]
    head, _, data = icon["src"].partition(",")
    assert head == "data:image/svg+xml;base64" and icon["mimeType"] == "image/svg+xml"
    assert base64.b64decode(data).startswith(b"<svg")


# -- an mcp 1.x client (langchain-mcp-adapters pins mcp < 2) -------------------------------------

MCP1_CLIENT = """
import asyncio, json, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import ListRootsResult, Root

params = StdioServerParameters(**json.loads(sys.argv[1]))

async def roots(context):
    return ListRootsResult(roots=[Root(uri=sys.argv[2], name="ws")])

async def once():
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, list_roots_callback=roots) as session:
            await session.initialize()  # then close at once, as langchain-mcp-adapters' server-info probe does

failures = []
for _ in range(int(sys.argv[3])):
    try:
        asyncio.run(once())
    except BaseException as exc:
        failures.append(repr(exc)[:300])
print(json.dumps({"failures": failures}))
"""


def _mcp1_python() -> Path | None:
    """A venv with the newest mcp 1.x, made once and kept (`DSH_MEMORY_TEST_MCP1_VENV` or the user cache)."""
    import os
    import subprocess
    import sys

    venv = Path(os.environ.get("DSH_MEMORY_TEST_MCP1_VENV") or Path.home() / ".cache" / "dsh-memory-mcp-tests" / "mcp1")
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    marker = venv / ".mcp1-ready"
    if not marker.exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "mcp>=1.10,<2"],
                check=True,
                timeout=300,
                capture_output=True,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        marker.write_text("mcp<2\n", encoding="utf-8")
    return python


@pytest.mark.slow
def test_an_mcp_1_client_that_closes_right_after_initialize_never_crashes(tmp_path, store_dir, dirs):
    import subprocess

    from tests.conftest import PYTHON, subprocess_env

    python = _mcp1_python()
    require(python is not None, "an mcp 1.x venv (pip install 'mcp<2' from PyPI)")
    assert python is not None
    server = {
        "command": PYTHON,
        "args": ["-m", "dsh_memory_mcp", "--no-relay", "--store-dir", str(store_dir)],
        "env": subprocess_env(),
        "cwd": str(dirs["cwd"]),
    }
    run = subprocess.run(
        # 5 rounds: an eager roots/list crashed 19 of 20 such clients, so 5 clean ones rule it out.
        [str(python), "-c", MCP1_CLIENT, json.dumps(server), dirs["app"].as_uri(), "5"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=600,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {"failures": []}
