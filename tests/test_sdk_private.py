"""The private parts of the MCP SDK we still use, one test each: a new SDK that renames, reshapes or
changes one of them fails here, by name, instead of somewhere deep in `serve`.

Everything private lives in `transports/sdk_private.py` (`PRIVATE_NAMES`); the rest of the code is on
the SDK's public API, which the last tests check by reading the sources.
"""

from __future__ import annotations

import inspect
import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import Client
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from dsh_memory_mcp.transports import sdk_private
from dsh_memory_mcp.transports.sdk_private import PRIVATE_NAMES, SessionLifecycle

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "dsh_memory_mcp"


class _Recorder(SessionLifecycle):
    def __init__(self) -> None:
        super().__init__(app=Server("probe"))
        self.started: list[str] = []
        self.ended: list[str] = []

    def session_started(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self.started.append(session_id)

    def session_ended(self, session_id: str) -> None:
        self.ended.append(session_id)


def test_the_list_of_private_names_is_exactly_what_the_module_overrides():
    overridden = {name for name in vars(SessionLifecycle) if name.startswith("_") and not name.startswith("__")}
    assert {name for owner, name in PRIVATE_NAMES if owner is StreamableHTTPSessionManager} == overridden


def test_admit_session_is_still_the_managers_sync_hook_that_makes_a_session_and_returns_its_transport():
    method = StreamableHTTPSessionManager.__dict__.get("_admit_session")
    assert method is not None, "StreamableHTTPSessionManager._admit_session is gone: rework sdk_private"
    assert not inspect.iscoroutinefunction(method), "_admit_session became async: sdk_private calls it sync"
    assert list(inspect.signature(method).parameters) == ["self", "requestor"], inspect.signature(method)
    manager = _Recorder()
    transport = manager._admit_session(None)
    assert isinstance(transport, StreamableHTTPServerTransport)
    assert transport.mcp_session_id and manager.started == [transport.mcp_session_id]
    # At the session limit it answers None (and nothing is started).
    full = _Recorder()
    full.max_sessions = 1
    assert full._admit_session(None) is not None and full._admit_session(None) is None
    assert len(full.started) == 1


def test_discard_session_is_still_the_managers_async_hook_that_forgets_a_session_and_ends_its_transport():
    method = StreamableHTTPSessionManager.__dict__.get("_discard_session")
    assert method is not None, "StreamableHTTPSessionManager._discard_session is gone: rework sdk_private"
    assert inspect.iscoroutinefunction(method), "_discard_session is no longer a coroutine"
    assert list(inspect.signature(method).parameters) == ["self", "session_id", "transport"]
    manager = _Recorder()
    transport = manager._admit_session(None)
    assert transport is not None and transport.mcp_session_id is not None
    sid = transport.mcp_session_id

    async def end() -> None:
        await manager.end_session(sid, transport)

    anyio.run(end)
    assert manager.ended == [sid]
    assert transport.is_terminated


def test_the_manager_still_calls_discard_session_when_a_client_deletes_its_session():
    # serve's session count and shutdown depend on every end of a session passing through the hook.
    source = inspect.getsource(StreamableHTTPSessionManager)
    assert source.count("self._discard_session(") >= 3, "the manager ends sessions some other way now"


def test_client_params_is_one_object_per_handshake_connection():
    # Not a private name but an unwritten behaviour mcp_server relies on for per-session state.
    seen: list[tuple[str, int]] = []

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        seen.append((params.name, id(ctx.session.client_params)))
        return types.CallToolResult(content=[])

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name=n, input_schema={"type": "object"}) for n in ("a1", "a2", "b1", "b2")]
        )

    server = Server("probe", on_call_tool=call_tool, on_list_tools=list_tools)

    async def main() -> None:
        async with Client(server, mode="legacy") as a, Client(server, mode="legacy") as b:
            await a.call_tool("a1")
            await b.call_tool("b1")
            await a.call_tool("a2")
            await b.call_tool("b2")

    anyio.run(main)
    ids = dict(seen)
    assert ids["a1"] == ids["a2"] and ids["b1"] == ids["b2"] and ids["a1"] != ids["b1"], seen


def test_mcp_is_pinned_to_the_minor_we_test_while_private_names_remain():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    pin = next(d for d in deps if re.match(r"mcp\b", d))
    if PRIVATE_NAMES:
        assert pin == "mcp>=2.3,<2.4", pin
        assert version("mcp").startswith("2.3."), version("mcp")


def test_no_other_module_touches_a_private_sdk_name():
    offences: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "sdk_private.py":
            continue
        text = path.read_text(encoding="utf-8")
        for name in ("_lowlevel_server", "_tool_manager", "_connection", "_admit_session", "_discard_session"):
            if re.search(rf"\.{name}\b", text):
                offences.append(f"{path.name}: .{name}")
        for name in ("FuncMetadata", "ArgModelBase", "MCPServer"):
            if re.search(rf"\b{name}\b", text):
                offences.append(f"{path.name}: {name}")
        for module in re.findall(r"^\s*(?:from|import)\s+(mcp(?:_types)?(?:\.\w+)*)", text, re.M):
            if any(part.startswith("_") for part in module.split(".")):
                offences.append(f"{path.name}: imports {module}")
    assert offences == [], "private SDK names outside transports/sdk_private.py"


def test_the_module_docstring_names_every_private_name():
    doc = sdk_private.__doc__ or ""
    for owner, name in PRIVATE_NAMES:
        assert f"{owner.__name__}.{name}" in doc, name
