"""End to end over real stdio: `python -m dsh_memory_mcp` spawned and driven by the official client."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import subprocess_env
from tests.helpers.mcp_session import server_params, stdio_session

TOOLS = {"memory_save", "memory_search", "memory_list", "memory_get", "memory_forget"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "workspace" / "app"
    path.mkdir(parents=True)
    return path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_handshake_names_the_server_and_lists_five_tools_with_schemas(tmp_path, store_dir, project):
    with stdio_session(server_params(store_dir, project=project), tmp_path / "err.log") as s:
        assert s.init.server_info.name == "dsh-memory-mcp"
        assert s.init.server_info.version == "0.1.0"
        assert "memory_search" in (s.init.instructions or "")
        tools = {t.name: t for t in s.list_tools().tools}
    assert set(tools) == TOOLS
    save = tools["memory_save"]
    assert save.input_schema["required"] == ["content"]
    assert save.input_schema["properties"]["kind"]["enum"] == [
        "fact",
        "decision",
        "preference",
        "procedure",
        "note",
        "rule",
    ]
    assert save.output_schema is not None and "deduped" in save.output_schema["properties"]
    assert save.annotations.idempotent_hint is True and save.annotations.read_only_hint is False
    search = tools["memory_search"]
    assert search.input_schema["properties"]["topK"] == {"type": "integer", "minimum": 1, "maximum": 20, "default": 5}
    assert search.annotations.read_only_hint is True
    assert tools["memory_list"].annotations.read_only_hint is True
    assert tools["memory_get"].annotations.read_only_hint is True
    assert tools["memory_forget"].annotations.destructive_hint is True
    for tool in tools.values():
        assert "Errors:" in tool.description


def test_each_tool_works_over_stdio_and_changes_the_disk(tmp_path, store_dir, project):
    with stdio_session(server_params(store_dir, project=project), tmp_path / "err.log") as s:
        saved = s.call(
            "memory_save",
            {
                "content": "前端统一用 TypeScript 严格模式",
                "kind": "decision",
                "tags": ["ts", "前端"],
                "importance": 0.9,
            },
        )
        assert not saved.is_error
        sc = saved.structured_content
        assert sc["ok"] is True and sc["deduped"] is False and sc["scope"] == "global" and sc["kind"] == "decision"
        rid = sc["id"]
        assert saved.content[0].text == f"已保存记忆 {rid[:8]} @ global"
        on_disk = _lines(store_dir / "global.jsonl")
        assert [r["id"] for r in on_disk] == [rid]
        assert list(on_disk[0])[:10] == [
            "id",
            "scope",
            "kind",
            "content",
            "tags",
            "source",
            "createdAt",
            "updatedAt",
            "lastAccessedAt",
            "accessCount",
        ]

        again = s.call("memory_save", {"content": "前端统一用 TypeScript 严格模式"})
        assert again.structured_content["deduped"] is True and again.structured_content["id"] == rid
        assert len(_lines(store_dir / "global.jsonl")) == 1

        proj = s.call("memory_save", {"content": "This app deploys with blue-green releases", "scope": "project"})
        assert proj.structured_content["scope"] == f"project:{project}"

        found = s.call("memory_search", {"query": "严格模式"})
        assert not found.is_error
        fs = found.structured_content
        assert fs["count"] == 1 and fs["scopes"] == [f"project:{project}", "global"]
        rec = fs["records"][0]
        assert rec["id"] == rid and rec["shortId"] == rid[:8] and rec["tags"] == ["ts", "前端"]
        assert isinstance(rec["score"], float) and rec["importance"] == 0.9
        text = found.content[0].text
        assert text.startswith(f"找到 1 条记忆(检索范围:{project} [来自 --project], global)\n\n[")
        assert (
            f"(global/decision) 前端统一用 TypeScript 严格模式\n  id={rid[:8]} tags=ts,前端 importance=0.90 updated="
            in text
        )
        assert text.endswith("提示:需要完整内容时用 memory_get 传入上面的 8 位 id 前缀。")

        listed = s.call("memory_list", {})
        assert listed.structured_content["count"] == 2
        assert listed.structured_content["records"][0]["content"] == "This app deploys with blue-green releases"

        got = s.call("memory_get", {"ids": [rid[:8], rid, "nonexistent-id"]})
        gs = got.structured_content
        assert gs["count"] == 1 and gs["records"][0]["content"] == "前端统一用 TypeScript 严格模式"
        assert gs["missing"] == ["nonexistent-id"]

        gone = s.call("memory_forget", {"id": rid[:8]})
        assert gone.structured_content == {"ok": True, "deleted": 1, "ids": [rid]}
        assert gone.content[0].text == f"已删除 1 条记忆 {rid[:8]} @ global"
        assert _lines(store_dir / "global.jsonl") == []
        assert s.call("memory_search", {"query": "严格模式"}).structured_content["count"] == 0


ERROR_CASES = [
    ("memory_save", {}, "CONTENT_EMPTY"),
    ("memory_save", {"content": 42}, "CONTENT_EMPTY"),
    ("memory_save", {"content": "   "}, "CONTENT_EMPTY"),
    ("memory_save", {"content": "x", "kind": "opinion"}, "KIND_INVALID"),
    ("memory_save", {"content": "x", "importance": 1.5}, "IMPORTANCE_RANGE"),
    ("memory_save", {"content": "x", "importance": "high"}, "IMPORTANCE_RANGE"),
    ("memory_save", {"content": "x", "path": ""}, "PATH_INVALID"),
    ("memory_save", {"content": "x", "path": "/tmp/a", "scope": "global"}, "PATH_SCOPE_CONFLICT"),
    ("memory_save", {"content": "x", "scope": "a/b"}, "SCOPE_INVALID"),
    ("memory_save", {"content": "x", "scope": "all"}, "SCOPE_NOT_WRITABLE"),
    ("memory_save", {"content": "x", "path": "/tmp/a", "scope": "bad:name"}, "SCOPE_NAME_INVALID"),
    ("memory_save", {"content": "x", "tags": {"a": 1}}, "TAGS_INVALID"),
    ("memory_save", {"content": "x" * 20_001}, "CONTENT_TOO_LONG"),
    ("memory_save", {"content": "部署 token: ghp_" + "a1B2c3D4e5" * 4}, "CONTENT_SECRET"),
    ("memory_search", {}, "QUERY_EMPTY"),
    ("memory_search", {"query": ""}, "QUERY_EMPTY"),
    ("memory_search", {"query": "x", "topK": 0}, "TOPK_RANGE"),
    ("memory_search", {"query": "x", "topK": 21}, "TOPK_RANGE"),
    ("memory_search", {"query": "x", "topK": 2.5}, "TOPK_RANGE"),
    ("memory_list", {"limit": 0}, "LIMIT_RANGE"),
    ("memory_list", {"limit": 201}, "LIMIT_RANGE"),
    ("memory_list", {"kind": "nope"}, "KIND_INVALID"),
    ("memory_get", {}, "IDS_EMPTY"),
    ("memory_get", {"ids": []}, "IDS_EMPTY"),
    ("memory_get", {"ids": "   "}, "IDS_EMPTY"),
    ("memory_forget", {}, "TARGET_REQUIRED"),
    ("memory_forget", {"id": "abcdefgh", "query": "x"}, "TARGET_AMBIGUOUS"),
    ("memory_forget", {"query": "x", "scope": "all"}, "SCOPE_NOT_WRITABLE"),
    ("memory_nope", {}, "UNKNOWN_TOOL"),
]


def test_every_error_code_comes_back_structured_with_a_fix(tmp_path, store_dir, project):
    with stdio_session(server_params(store_dir, project=project), tmp_path / "err.log") as s:
        s.call("memory_save", {"content": "alias owner", "path": str(tmp_path / "one"), "scope": "shared-name"})
        results = [(tool, args, code, s.call(tool, args)) for tool, args, code in ERROR_CASES]
        taken = s.call("memory_save", {"content": "y", "path": str(tmp_path / "two"), "scope": "shared-name"})
        (store_dir / "projects").mkdir(exist_ok=True)
        broken_scope = "session:broken"
        import hashlib

        (store_dir / "projects" / (hashlib.sha1(broken_scope.encode()).hexdigest() + ".jsonl")).mkdir()
        store_error = s.call("memory_save", {"content": "z", "scope": broken_scope})
    for tool, args, code, result in [*results, ("memory_save", {}, "SCOPE_NAME_TAKEN", taken)]:
        assert result.is_error, (tool, args)
        sc = result.structured_content
        assert sc["ok"] is False and sc["code"] == code, (tool, args, sc)
        assert sc["message"] and "Traceback" not in result.content[0].text
        assert code in result.content[0].text
    assert store_error.is_error and store_error.structured_content["code"] == "STORE_ERROR"
    assert "Traceback" not in store_error.content[0].text


def test_a_lock_held_by_another_live_process_times_out_with_lock_timeout(tmp_path, store_dir, project):
    locks = store_dir / ".locks"
    locks.mkdir(parents=True)
    import hashlib

    marker = locks / (hashlib.sha1(b"global").hexdigest() + ".lock")
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        marker.write_text(
            json.dumps({"pid": holder.pid, "host": socket.gethostname(), "createdAt": int(time.time() * 1000)}),
            encoding="utf-8",
        )
        with stdio_session(server_params(store_dir, project=project), tmp_path / "err.log") as s:
            started = time.monotonic()
            result = s.call("memory_save", {"content": "blocked"})
            waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert result.is_error and result.structured_content["code"] == "LOCK_TIMEOUT"
    assert 9 <= waited < 25
    assert marker.exists(), "a live holder's lock must not be broken"


def test_two_servers_share_one_store(tmp_path, store_dir, project):
    with (
        stdio_session(server_params(store_dir, project=project), tmp_path / "a.log") as a,
        stdio_session(server_params(store_dir, project=project), tmp_path / "b.log") as b,
    ):
        saved = a.call("memory_save", {"content": "The user prefers pnpm over npm", "kind": "preference"})
        found = b.call("memory_search", {"query": "pnpm"})
        assert found.structured_content["records"][0]["id"] == saved.structured_content["id"]


def test_a_raw_2024_11_05_session_gets_only_json_rpc_on_stdout_and_exits_0_on_eof(tmp_path, store_dir):
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2024-11-05",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "memory_save", "arguments": {"content": "raw 会话也能保存"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "memory_search", "arguments": {"query": "协议"}},
        },
    ]
    # Requests run concurrently, so the search must not depend on the save in the same batch:
    # it finds a record that was on disk before the server started.
    store_dir.mkdir()
    (store_dir / "global.jsonl").write_text(
        json.dumps(
            {"id": "0f0f0f0f-seed", "scope": "global", "kind": "fact", "content": "MCP 协议走 stdio"},
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    stdin = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
    proc = subprocess.run(
        [sys.executable, "-m", "dsh_memory_mcp", "--store-dir", str(store_dir)],
        input=stdin.encode("utf-8"),
        capture_output=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    out = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    assert all(m.get("jsonrpc") == "2.0" for m in out)
    by_id = {m["id"]: m for m in out if "id" in m}
    assert by_id[1]["result"]["protocolVersion"] == "2024-11-05"
    assert by_id[1]["result"]["serverInfo"]["name"] == "dsh-memory-mcp"
    assert len(by_id[2]["result"]["tools"]) == 5
    assert by_id[3]["result"]["structuredContent"]["ok"] is True
    assert by_id[4]["result"]["structuredContent"]["records"][0]["id"] == "0f0f0f0f-seed"
    assert "raw 会话也能保存" in (store_dir / "global.jsonl").read_text(encoding="utf-8")
    err = proc.stderr.decode("utf-8")
    assert "[dsh-memory-mcp] store-dir = " in err and "已启动 dsh-memory-mcp v0.1.0(stdio)" in err


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_every_handshake_version_a_host_sends_is_accepted(store_dir, version):
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "memory_list", "arguments": {}},
    }
    stdin = "\n".join(json.dumps(m) for m in (init, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call))
    proc = subprocess.run(
        [sys.executable, "-m", "dsh_memory_mcp", "--store-dir", str(store_dir)],
        input=(stdin + "\n").encode(),
        capture_output=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert proc.returncode == 0
    out = {m["id"]: m for m in map(json.loads, proc.stdout.decode().splitlines()) if "id" in m}
    assert out[1]["result"]["protocolVersion"] == version
    assert out[2]["result"]["structuredContent"]["ok"] is True


def test_store_files_are_private_to_the_user(tmp_path, store_dir, project):
    with stdio_session(server_params(store_dir, project=project), tmp_path / "err.log") as s:
        s.call("memory_save", {"content": "kept in the given store"})
    assert (store_dir / "global.jsonl").exists()
    mode = (store_dir / "global.jsonl").stat().st_mode & 0o777
    assert mode == 0o600
    assert store_dir.stat().st_mode & 0o777 == 0o700
