"""Both protocol eras against real processes: 2026-07-28 (no handshake, `_meta` envelope on every
request) and the handshake era (`initialize`, sessions), on every path a host can take.

The conformance matrix: the official Python SDK client in mode `auto` (2026-07-28) and `legacy`
(the handshake) × {stdio direct, stdio relayed to a real `serve`, HTTP to `serve` with the bearer
token} × {roots declared, not declared}; then the TypeScript SDK clients (1.x, and the 2.x client
package in both modes) through the same three paths with roots. The path is a fixture, so the
relayed column is the same cells through one more process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation, ListRootsResult, Root

from tests.conftest import SRC
from tests.helpers.reap import stop_process
from tests.helpers.serve_proc import Serve, initialize, running_serve, sse_result, wait_listening

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX serve lifecycle"),
]

MODERN = "2026-07-28"


def _envelope(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-bridge", "version": "1"},
        **extra,
    }


def test_serve_answers_a_2026_request_with_no_session_and_no_routing_headers(tmp_path, store_dir):
    # What a stdio bridge (the relay) sends: the host's line as it is, no session, no MCP-* headers.
    with running_serve(store_dir, tmp_path / "err.log") as serve, httpx.Client(timeout=20) as http:
        auth = serve.auth()
        discover = {"jsonrpc": "2.0", "id": "d1", "method": "server/discover", "params": {"_meta": _envelope()}}
        r = http.post(serve.url, json=discover, headers=auth)
        assert r.status_code == 200, r.text
        assert "mcp-session-id" not in r.headers
        found = sse_result(r)
        assert found["id"] == "d1" and MODERN in found["result"]["supportedVersions"]
        assert found["result"]["resultType"] == "complete"

        save = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "memory_save", "arguments": {"content": "无会话也能保存"}, "_meta": _envelope()},
        }
        saved = sse_result(http.post(serve.url, json=save, headers=auth))
        assert saved["id"] == 7 and saved["result"]["structuredContent"]["ok"] is True, saved
        line = json.loads((store_dir / "global.jsonl").read_text(encoding="utf-8"))
        assert line["content"] == "无会话也能保存" and line["source"]["client"] == "raw-bridge/1"

        # A tool name that is not header-safe still routes (the derived Mcp-Name is base64-wrapped).
        odd = dict(save, id=8, params=dict(save["params"], name="记忆_save"))
        unknown = sse_result(http.post(serve.url, json=odd, headers=auth))
        assert unknown["result"]["structuredContent"]["code"] == "UNKNOWN_TOOL", unknown

        # A 2026-07-28 notification with no session is acknowledged, not refused.
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        assert http.post(serve.url, json=note, headers=auth).status_code == 202

        # Headers the client did send are checked, never overwritten: a mismatch is the SDK's 400.
        lying = http.post(serve.url, json=discover, headers=auth | {"Mcp-Method": "tools/list"})
        assert lying.status_code == 400 and sse_result(lying)["error"]["code"] == -32020, lying.text

        # The handshake era is untouched: initialize opens a session; an un-enveloped request
        # without one is still the SDK's "missing session" 400.
        assert initialize(serve, http)
        bare = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}
        refused = http.post(serve.url, json=bare, headers=auth)
        assert refused.status_code == 400 and "session" in refused.text.lower()


# ----------------------------------------------------------------------------------------------
# The conformance matrix

DIGEST_MARK = "用户的长期记忆摘要"
RULE = "提交前必须跑 make check"
CLIENT = Implementation(name="matrix-host", version="3.1")
#: Generous: this only catches a stall
#: (the handshake-era roots wait used to be 5 s).
FIRST_CALL_BUDGET = 4.0


def _clean_env(base: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env["DSH_MEMORY_VECTOR"] = "off"
    env["XDG_STATE_HOME"] = str(base / "xdg-state")
    env.update(extra)
    return env


@dataclass
class World:
    """One store with a standing rule, a live `serve` on it, the host's workspace and cwd."""

    base: Path
    store: Path
    project: Path
    cwd: Path
    serve: Serve
    errlog: Path

    def stdio(self, *args: str) -> StdioServerParameters:
        return StdioServerParameters(
            command=sys.executable,
            args=["-m", "dsh_memory_mcp", "--store-dir", str(self.store), *args],
            env=_clean_env(self.base),
            cwd=str(self.cwd),
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("eras")
    store, project, cwd = base / "store", base / "工作区 app", base / "host-cwd"
    for path in (store, project, cwd):
        path.mkdir()
    rule = {
        "id": "5b0e6a3c-1f2d-4c7e-9a8b-0d1e2f3a4b5c",
        "scope": "global",
        "kind": "rule",
        "content": RULE,
        "tags": [],
        "source": {"origin": "explicit"},
        "createdAt": 1792403053326,
        "updatedAt": 1792403053326,
        "importance": 0.9,
    }
    (store / "global.jsonl").write_text(json.dumps(rule, ensure_ascii=False) + "\n", encoding="utf-8")
    errlog = base / "serve.log"
    with errlog.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(store), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=_clean_env(base),
            cwd=str(base),
            text=True,
            encoding="utf-8",
        )
    try:
        info = wait_listening(proc, store, errlog)
        yield World(base, store, project, cwd, Serve(proc=proc, store_dir=store, errlog=errlog, info=info), errlog)
    finally:
        stop_process(proc)


class Roots:
    def __init__(self, project: Path) -> None:
        self.project = project
        self.asked = 0

    async def __call__(self, context: Any) -> ListRootsResult:
        self.asked += 1
        return ListRootsResult(roots=[Root(uri=self.project.as_uri(), name="workspace")])


@asynccontextmanager
async def connect(world: World, path: str, era: str, roots: Roots | None, log: Any) -> AsyncIterator[Client]:
    """A client on `path` ("direct", "relayed", "http") in `era` ("auto", "legacy")."""
    async with AsyncExitStack() as stack:
        if path == "http":
            auth = {"Authorization": f"Bearer {world.serve.token}"}
            http = await stack.enter_async_context(httpx2.AsyncClient(headers=auth, timeout=60))
            transport: Any = streamable_http_client(world.serve.url, http_client=http)
        else:
            params = world.stdio("--no-relay") if path == "direct" else world.stdio()
            transport = stdio_client(params, errlog=log)
        client = Client(transport, mode=era, list_roots_callback=roots, client_info=CLIENT, read_timeout_seconds=30)
        with warnings.catch_warnings():
            # roots are deprecated in 2026-07-28; today's hosts still send them
            warnings.simplefilter("ignore")
            yield await stack.enter_async_context(client)


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def _cell(world: World, path: str, era: str, with_roots: bool, log: Any) -> dict[str, Any]:
    roots = Roots(world.project) if with_roots else None
    out: dict[str, Any] = {}
    async with connect(world, path, era, roots, log) as client:
        out["revision"] = client.protocol_version
        out["instructions"] = client.instructions or ""
        t0 = time.monotonic()
        saved = await client.call_tool(
            "memory_save", {"content": f"矩阵 {path} {era} {with_roots}", "scope": "project"}
        )
        out["first_call_secs"] = time.monotonic() - t0
        out["saved"] = saved
        got = await client.call_tool("memory_get", {"ids": [saved.structured_content.get("id", "-")]})
        out["source"] = (got.structured_content.get("records") or [{}])[0].get("source")
        out["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
        recall = await client.get_prompt("recall", {"topic": "make check"})
        out["recall"] = recall.messages[0].content.text  # type: ignore[union-attr]
        out["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
        out["project_text"] = (await client.read_resource("memory://project")).contents[0].text  # type: ignore[union-attr]
        out["error"] = await client.call_tool("memory_get", {"ids": []})
    out["roots_asked"] = roots.asked if roots else 0
    return out


PATH_IDS = ("direct", "relayed", "http")
MATRIX = [(path, era, with_roots) for path in PATH_IDS for era in ("auto", "legacy") for with_roots in (True, False)]


def _cell_id(value: Any) -> str:
    return {True: "roots", False: "no-roots"}.get(value, str(value)) if isinstance(value, bool) else str(value)


@pytest.mark.parametrize(("path", "era", "with_roots"), MATRIX, ids=_cell_id)
def test_the_python_client_gets_the_whole_product_on_every_path_in_both_eras(world, tmp_path, path, era, with_roots):
    with (tmp_path / "client.log").open("w", encoding="utf-8") as log:
        out = anyio.run(_cell, world, path, era, with_roots, log)

    # The revision: 2026-07-28 when the client offers it, on every path alike (relayed = direct).
    assert out["revision"] == ("2026-07-28" if era == "auto" else "2025-11-25")
    # The digest in instructions (from server/discover as from initialize), after the usage guidance.
    assert out["instructions"].startswith("dsh-memory-mcp is the user's long-term memory")
    assert DIGEST_MARK in out["instructions"] and RULE in out["instructions"], out["instructions"]
    # The project source in the save's answer.
    saved = out["saved"]
    assert not saved.is_error, _text(saved)
    if with_roots:
        assert saved.structured_content["scope"] == f"project:{world.project}"
        assert _text(saved).endswith("[来自 客户端 roots]"), _text(saved)
        assert out["roots_asked"] >= 1
        assert out["first_call_secs"] < FIRST_CALL_BUDGET, out["first_call_secs"]
        assert f"范围:{world.project} [来自 客户端 roots]" in out["project_text"]
    else:
        expected = world.cwd if path != "http" else world.base  # serve's own working directory
        assert saved.structured_content["scope"] == f"project:{expected}", _text(saved)
        assert _text(saved).endswith("[来自 工作目录]"), _text(saved)
    # Provenance: the client info of initialize, or of each 2026-07-28 request's _meta.
    assert out["source"] == {"origin": "explicit", "client": "matrix-host/3.1"}, out["source"]
    # Prompts and resources.
    assert out["prompts"] == ["recall", "remember"]
    assert RULE in out["recall"]
    assert out["resources"][:2] == ["memory://global", "memory://project"]
    # A coded error (a tool's; a request's own error code is the next test).
    assert out["error"].is_error and out["error"].structured_content["code"] == "IDS_EMPTY"


async def _resource_error(world: World, path: str, era: str, log: Any) -> tuple[int, str]:
    async with connect(world, path, era, None, log) as client:
        with pytest.raises(MCPError) as raised:
            await client.read_resource("memory://nothing")
    return raised.value.error.code, raised.value.error.message


@pytest.mark.parametrize(("path", "era"), [(path, era) for path in PATH_IDS for era in ("auto", "legacy")])
def test_a_request_error_keeps_its_json_rpc_code_and_our_code_on_every_path_in_both_eras(world, tmp_path, path, era):
    with (tmp_path / "client.log").open("w", encoding="utf-8") as log:
        code, message = anyio.run(_resource_error, world, path, era, log)
    assert code == -32602 and message.startswith("UNKNOWN_RESOURCE:"), (code, message)


# ----------------------------------------------------------------------------------------------
# Roots: flags win, a client that does not answer gets the cwd within the budget, said once


class SilentRoots:
    """Declares roots, never answers `roots/list`."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self, context: Any) -> ListRootsResult:
        self.asked += 1
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


@pytest.mark.parametrize("path", ["direct", "http"])
def test_a_handshake_client_that_never_answers_roots_gets_the_cwd_within_the_budget_said_once(world, tmp_path, path):
    silent = SilentRoots()

    async def main() -> list[tuple[float, Any]]:
        out = []
        for _ in range(2):  # two sessions, two calls each
            with (tmp_path / "client.log").open("a", encoding="utf-8") as log:
                async with connect(world, path, "legacy", silent, log) as client:  # type: ignore[arg-type]
                    for _ in range(2):
                        t0 = time.monotonic()
                        saved = await client.call_tool("memory_save", {"content": f"沉默 {path}", "scope": "project"})
                        out.append((time.monotonic() - t0, saved))
        return out

    calls = anyio.run(main)
    for elapsed, saved in calls:
        assert _text(saved).endswith("[来自 工作目录]"), _text(saved)
        assert elapsed < 1.0 + 2.0, elapsed  # the server's budget is 1 s; the rest is the call itself
    assert silent.asked >= 1
    # Said once per server process: each direct session is its own process; serve is one.
    err = (world.errlog if path == "http" else tmp_path / "client.log").read_text(encoding="utf-8")
    said = [line for line in err.splitlines() if "matrix-host/3.1 声明了 roots 却没有给出" in line]
    assert len(said) == (1 if path == "http" else 2), said
    assert all("1 秒内没有回答 roots/list" in line for line in said)


def _modern_call(
    url: str, token: str, name: str, arguments: dict[str, Any], *, http: httpx.Client | None = None, **params: Any
) -> dict[str, Any]:
    meta = _envelope(**{"io.modelcontextprotocol/clientCapabilities": {"roots": {}}})
    meta["io.modelcontextprotocol/clientInfo"] = {"name": params.pop("client", "raw-roots"), "version": "1"}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta, **params},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    if http is not None:  # a kept-alive connection: the same client, call after call
        return sse_result(http.post(url, json=body, headers=headers))
    with httpx.Client(timeout=20) as own:  # one connection per call: each call is a new client here
        return sse_result(own.post(url, json=body, headers=headers))


def test_a_2026_clients_roots_answer_over_http_binds_only_the_request_that_carries_it(world):
    # A connection (and a clientInfo) may be shared by several clients: a pooled gateway, two SDK
    # clients on one httpx pool. An answer kept for "that connection" would be another client's.
    url, token = world.serve.url, world.serve.token
    answer = {"dsh-memory-mcp/roots": {"roots": [{"uri": world.project.as_uri(), "name": "w"}]}}
    with httpx.Client(timeout=20) as http:
        assert _modern_call(url, token, "memory_list", {}, http=http, client="kept")["result"]["resultType"] == (
            "input_required"
        )
        first = _modern_call(url, token, "memory_list", {}, http=http, client="kept", inputResponses=answer)
        assert first["result"]["structuredContent"]["scopes"][0] == f"project:{world.project}"
        # The next call on the same connection with the same clientInfo is asked for its own roots.
        again = _modern_call(url, token, "memory_search", {"query": "make"}, http=http, client="kept")["result"]
        assert again["resultType"] == "input_required"
        answered = _modern_call(
            url, token, "memory_search", {"query": "make"}, http=http, client="kept", inputResponses=answer
        )["result"]
        assert answered["structuredContent"]["scopes"][0] == f"project:{world.project}"


def test_a_2026_client_that_asks_again_instead_of_answering_gets_the_cwd_after_the_budget(world):
    url, token = world.serve.url, world.serve.token
    with httpx.Client(timeout=20) as http:
        start = time.monotonic()
        asked = _modern_call(url, token, "memory_list", {}, http=http, client="forgetful")["result"]
        assert asked["resultType"] == "input_required"
        deadline = start + 10
        while time.monotonic() < deadline:  # a client that never answers, only calls again
            result = _modern_call(url, token, "memory_list", {}, http=http, client="forgetful")["result"]
            if result["resultType"] == "complete":
                break
            time.sleep(0.05)
        waited = time.monotonic() - start
    assert result["resultType"] == "complete" and result["structuredContent"]["scopes"][0] == f"project:{world.base}"
    assert 1.0 <= waited < 5.0, waited
    said = [line for line in world.serve.stderr().splitlines() if "forgetful/1 声明了 roots 却没有给出" in line]
    assert len(said) == 1 and "没有带着 roots 重试" in said[0]


def test_a_2026_client_is_asked_for_roots_with_input_required_and_one_that_does_not_answer_keeps_the_cwd(world):
    url, token = world.serve.url, world.serve.token
    asked = _modern_call(url, token, "memory_list", {}, client="asked-host")["result"]
    assert asked["resultType"] == "input_required"
    assert asked["inputRequests"] == {"dsh-memory-mcp/roots": {"method": "roots/list"}}
    assert "requestState" not in asked

    answered = _modern_call(
        url,
        token,
        "memory_list",
        {},
        client="asked-host",
        inputResponses={"dsh-memory-mcp/roots": {"roots": [{"uri": world.project.as_uri(), "name": "w"}]}},
    )["result"]
    assert answered["resultType"] == "complete"
    assert answered["structuredContent"]["scopes"][0] == f"project:{world.project}"

    # An answer of another kind: the working directory (serve's), said once.
    declined = _modern_call(
        url, token, "memory_list", {}, client="odd-host", inputResponses={"dsh-memory-mcp/roots": {"action": "decline"}}
    )["result"]
    assert declined["structuredContent"]["scopes"][0] == f"project:{world.base}"
    said = [line for line in world.serve.stderr().splitlines() if "odd-host/1 声明了 roots 却没有给出" in line]
    assert len(said) == 1 and "回答的不是 roots/list 的结果" in said[0]


def test_the_project_flag_and_env_win_over_roots_in_2026_too_and_roots_are_never_asked(world, tmp_path):
    flag, env_dir = tmp_path / "flag", tmp_path / "env"
    flag.mkdir()
    env_dir.mkdir()

    async def main() -> list[tuple[Any, int]]:
        out = []
        variants = [
            world.stdio("--no-relay", "--project", str(flag)),
            StdioServerParameters(
                **{
                    **world.stdio("--no-relay").model_dump(),
                    "env": _clean_env(world.base, DSH_MEMORY_PROJECT=str(env_dir)),
                }
            ),
        ]
        with (tmp_path / "client.log").open("w", encoding="utf-8") as log:
            for params in variants:
                roots = Roots(world.project)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    async with Client(stdio_client(params, errlog=log), mode="auto", list_roots_callback=roots) as c:
                        assert c.protocol_version == MODERN
                        out.append(
                            (await c.call_tool("memory_save", {"content": "旗标优先", "scope": "project"}), roots.asked)
                        )
        return out

    (by_flag, asked_flag), (by_env, asked_env) = anyio.run(main)
    assert _text(by_flag).endswith(f"@ project:{flag} [来自 --project]") and asked_flag == 0
    assert _text(by_env).endswith(f"@ project:{env_dir} [来自 DSH_MEMORY_PROJECT]") and asked_env == 0


def test_a_2026_digest_is_never_cached_and_shows_a_new_rule_at_the_next_discover(world):
    auth = world.serve.auth()
    discover = {"jsonrpc": "2.0", "id": "d", "method": "server/discover", "params": {"_meta": _envelope()}}
    with httpx.Client(timeout=20) as http:
        first = sse_result(http.post(world.serve.url, json=discover, headers=auth))["result"]
        assert first["ttlMs"] == 0 and first["cacheScope"] == "private"
        assert "每周五发布" not in first["instructions"]
        save = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "memory_save",
                "arguments": {"content": "每周五发布", "kind": "rule"},
                "_meta": _envelope(),
            },
        }
        assert sse_result(http.post(world.serve.url, json=save, headers=auth))["result"]["structuredContent"]["ok"]
        second = sse_result(http.post(world.serve.url, json=discover, headers=auth))["result"]
        assert "每周五发布" in second["instructions"]
        listed = {"jsonrpc": "2.0", "id": 3, "method": "resources/list", "params": {"_meta": _envelope()}}
        assert sse_result(http.post(world.serve.url, json=listed, headers=auth))["result"]["ttlMs"] == 0
        tools = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": _envelope()}}
        assert sse_result(http.post(world.serve.url, json=tools, headers=auth))["result"]["ttlMs"] > 0
        # The handshake era gets no 2026-07-28 fields.
        sid = initialize(world.serve, http)
        legacy = http.post(
            world.serve.url,
            json={"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
            headers=auth | {"mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"},
        )
        assert not {"ttlMs", "cacheScope", "resultType"} & set(sse_result(legacy)["result"])


# ----------------------------------------------------------------------------------------------
# The TypeScript SDK clients through the same three paths, with roots

TS_CLIENTS = [
    pytest.param("v1", None, "2025-11-25", id="sdk-1.x"),
    pytest.param("v2", "auto", MODERN, id="client-2.x-auto"),
    pytest.param("v2", "legacy", "2025-11-25", id="client-2.x-legacy"),
]


@pytest.mark.parametrize("path", PATH_IDS)
@pytest.mark.parametrize(("sdk", "mode", "revision"), TS_CLIENTS)
def test_the_typescript_clients_get_the_whole_product_on_every_path(world, tmp_path, path, sdk, mode, revision):
    from tests.helpers.ts_client import client_v2_version, drive, http_target, require_ts_client

    require_ts_client(client_v2=sdk == "v2")
    if sdk == "v2":
        assert client_v2_version() == "2.4.0"
    if path == "http":
        target = http_target(world.serve.url, {"Authorization": f"Bearer {world.serve.token}"})
    else:
        params = world.stdio("--no-relay") if path == "direct" else world.stdio()
        target = {
            "transport": "stdio",
            "command": params.command,
            "args": params.args,
            "env": params.env,
            "cwd": params.cwd,
            "stderrPath": str(tmp_path / "server.log"),
        }
    steps = [
        {"op": "call", "name": "memory_save", "arguments": {"content": f"TS {sdk} {mode} {path}", "scope": "project"}},
        {"op": "listPrompts"},
        {"op": "getPrompt", "name": "recall", "arguments": {"topic": "make check"}},
        {"op": "readResource", "uri": "memory://project"},
        {"op": "call", "name": "memory_get", "arguments": {"ids": []}},
    ]
    out = drive(
        target,
        steps,
        workdir=tmp_path / "ts",
        roots=[{"uri": world.project.as_uri(), "name": "workspace"}],
        client_info={"name": "ts-matrix", "version": "9"},
        sdk=sdk,
        mode=mode,
    )
    assert out["protocolVersion"] == revision
    assert out["serverVersion"]["name"] == "dsh-memory-mcp"
    assert DIGEST_MARK in out["instructions"] and RULE in out["instructions"]
    saved, prompts, recall, project, bad = (step.get("result", step) for step in out["steps"])
    assert saved["structuredContent"]["scope"] == f"project:{world.project}", saved
    assert saved["content"][0]["text"].endswith("[来自 客户端 roots]")
    assert out["rootsRequests"] >= 1
    assert [p["name"] for p in prompts["prompts"]] == ["recall", "remember"]
    assert RULE in recall["messages"][0]["content"]["text"]
    assert f"范围:{world.project} [来自 客户端 roots]" in project["contents"][0]["text"]
    # validated by the client's own Ajv against the outputSchema: the error branch must be there
    assert bad["isError"] is True and bad["structuredContent"]["code"] == "IDS_EMPTY", bad


def test_the_v2_typescript_client_is_pinned_by_the_lock_file_like_the_1x_sdk():
    ts = Path(__file__).resolve().parent / "ts"
    package = json.loads((ts / "package.json").read_text(encoding="utf-8"))
    assert package["dependencies"]["@modelcontextprotocol/client"] == "2.4.0"
    lock = json.loads((ts / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"]["node_modules/@modelcontextprotocol/client"]["version"] == "2.4.0"
    assert lock["packages"]["node_modules/@modelcontextprotocol/client"]["integrity"].startswith("sha512-")
