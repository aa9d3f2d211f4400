"""Host compatibility: the official TypeScript SDK client (what Claude Code, Cursor, VS Code and the
Inspector are built on) drives the real server over stdio, through its validating paths.

`Client.callTool` checks `structuredContent` against the tool's `outputSchema` with Ajv even when
`isError` is true, so every error case here would come back as `MCP error -32602` if an error
shape did not fit the schema. The cases and the expected codes are written out here, not derived
from the server. Skips locally without `tests/ts/node_modules`; fails in CI (`CI=true`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh_memory_mcp.store.records import new_record
from tests.helpers.ts_client import TS_DIR, drive, inspector_cli, require_ts_client, sdk_version, stdio_target

TOOLS = ["memory_forget", "memory_get", "memory_list", "memory_save", "memory_search"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "workspace" / "应用"
    path.mkdir(parents=True)
    return path


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"op": "call", "name": name, "arguments": arguments}


def _results(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Every step's result; a thrown error (e.g. -32602) fails with its message."""
    thrown = [(i, s["op"], s["threw"]) for i, s in enumerate(out["steps"]) if "threw" in s]
    assert not thrown, thrown
    return [s["result"] for s in out["steps"]]


def _text(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


def test_the_pinned_sdk_is_the_one_the_hosts_ship():
    require_ts_client()
    assert sdk_version() == "1.32.2"
    lock = json.loads((TS_DIR / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"]["node_modules/@modelcontextprotocol/sdk"]["version"] == "1.32.2"


def test_every_tool_works_through_the_typescript_client_with_chinese_content(tmp_path, store_dir, project):
    content = "部署前必须跑完整测试套件,包括 TypeScript 客户端的兼容性测试"
    out = drive(
        stdio_target(store_dir, tmp_path / "err.log", project=project),
        [
            {"op": "listTools"},
            _call("memory_save", {"content": content, "kind": "rule", "tags": ["部署"], "importance": 0.9}),
            _call("memory_save", {"content": "这个项目用 pnpm 管理依赖", "scope": "project"}),
            _call("memory_save", {"content": content, "kind": "rule"}),
            _call("memory_search", {"query": "部署 测试", "topK": 3}),
            _call("memory_list", {"kind": "rule"}),
            _call("memory_list", {"scope": "all", "limit": 10}),
            _call("memory_forget", {"query": "pnpm"}),
        ],
        workdir=tmp_path,
    )
    listed, saved, in_project, again, found, rules, everything, forgot = _results(out)
    assert sorted(t["name"] for t in listed["tools"]) == TOOLS
    assert all(t["outputSchema"]["type"] == "object" for t in listed["tools"])
    assert out["serverVersion"]["name"] == "dsh-memory-mcp"

    assert saved["isError"] is False
    rid = saved["structuredContent"]["id"]
    assert saved["structuredContent"] == {"ok": True, "id": rid, "deduped": False, "scope": "global", "kind": "rule"}
    assert _text(saved) == f"已保存记忆 {rid[:8]} @ global"
    assert in_project["structuredContent"]["scope"] == f"project:{project}"
    assert again["structuredContent"]["deduped"] is True and again["structuredContent"]["id"] == rid

    assert found["structuredContent"]["count"] >= 1
    top = found["structuredContent"]["records"][0]
    assert top["id"] == rid and top["content"] == content and top["tags"] == ["部署"] and top["importance"] == 0.9
    assert content in _text(found)
    assert [r["id"] for r in rules["structuredContent"]["records"]] == [rid]
    assert everything["structuredContent"]["count"] == 2

    got = drive(
        stdio_target(store_dir, tmp_path / "err2.log", project=project),
        [{"op": "listTools"}, _call("memory_get", {"ids": [rid[:8], "zzzzzzzz"]})],
        workdir=tmp_path,
    )
    fetched = _results(got)[1]
    assert fetched["isError"] is False
    assert fetched["structuredContent"]["records"][0]["content"] == content
    assert fetched["structuredContent"]["missing"] == ["zzzzzzzz"]
    assert content in _text(fetched)
    assert forgot["structuredContent"]["deleted"] == 1


#: Every error code a caller can provoke with arguments alone (LOCK_TIMEOUT/STORE_ERROR need a
#: stuck lock or a broken disk; their shape is checked by the schema tests below).
ERROR_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("memory_save", {"content": "   "}, "CONTENT_EMPTY"),
    ("memory_save", {"content": "x", "kind": "灵感"}, "KIND_INVALID"),
    ("memory_save", {"content": "x", "importance": 2}, "IMPORTANCE_RANGE"),
    ("memory_save", {"content": "x", "path": ""}, "PATH_INVALID"),
    ("memory_save", {"content": "x", "path": "/tmp/a", "scope": "global"}, "PATH_SCOPE_CONFLICT"),
    ("memory_save", {"content": "x", "scope": "a/b"}, "SCOPE_INVALID"),
    ("memory_save", {"content": "x", "scope": "all"}, "SCOPE_NOT_WRITABLE"),
    ("memory_save", {"content": "x", "path": "/tmp/a", "scope": "bad:name"}, "SCOPE_NAME_INVALID"),
    ("memory_save", {"content": "x", "path": "/tmp/b", "scope": "别名甲"}, "SCOPE_NAME_TAKEN"),
    ("memory_save", {"content": "x", "tags": {"a": 1}}, "TAGS_INVALID"),
    ("memory_save", {"content": "长" * 20_001}, "CONTENT_TOO_LONG"),
    ("memory_save", {"content": "部署用 ghp_" + "Zx81Qw0aB7" * 4}, "CONTENT_SECRET"),
    ("memory_save", {"content": "x", "supersedes": "short"}, "TOOL_ERROR"),
    ("memory_search", {"query": ""}, "QUERY_EMPTY"),
    ("memory_search", {"query": "x", "topK": 0}, "TOPK_RANGE"),
    ("memory_search", {"query": "x", "scope": "project:"}, "SCOPE_INVALID"),
    ("memory_list", {"limit": 500}, "LIMIT_RANGE"),
    ("memory_list", {"kind": "todo"}, "KIND_INVALID"),
    ("memory_get", {"ids": []}, "IDS_EMPTY"),
    ("memory_forget", {}, "TARGET_REQUIRED"),
    ("memory_forget", {"id": "abcdefgh", "query": "x"}, "TARGET_AMBIGUOUS"),
    ("memory_forget", {"query": "x", "scope": "all"}, "SCOPE_NOT_WRITABLE"),
    ("memory_nonexistent", {}, "UNKNOWN_TOOL"),
]


def test_every_error_code_reaches_the_typescript_client_as_is_error_with_its_code(tmp_path, store_dir, project):
    setup = _call("memory_save", {"content": "别名占位", "path": "/tmp/a", "scope": "别名甲"})
    out = drive(
        stdio_target(store_dir, tmp_path / "err.log", project=project),
        [{"op": "listTools"}, setup, *(_call(name, args) for name, args, _ in ERROR_CASES)],
        workdir=tmp_path,
    )
    results = _results(out)[2:]
    assert len(results) == len(ERROR_CASES)
    for (name, args, code), result in zip(ERROR_CASES, results, strict=True):
        assert result["isError"] is True, (name, args, result)
        structured = result["structuredContent"]
        assert structured["ok"] is False and structured["code"] == code, (name, args, structured)
        assert structured["message"] and any("\u4e00" <= ch <= "\u9fff" for ch in structured["message"])
        assert _text(result) == f"错误 {code}:{structured['message']}"


def test_the_inspector_cli_reports_no_schema_portability_problems(tmp_path, store_dir, project):
    target = stdio_target(store_dir, tmp_path / "err.log", project=project)
    env_args = [
        arg
        for key in ("DSH_MEMORY_STORE_DIR", "DSH_MEMORY_VECTOR", "PYTHONPATH", "XDG_STATE_HOME")
        if key in target["env"]
        for arg in ("-e", f"{key}={target['env'][key]}")
    ]
    proc = subprocess.run(
        [*inspector_cli(), *env_args, target["command"], *target["args"], "--method", "tools/list", "--strict"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=90,
        check=False,
        env={**target["env"], "HOME": str(tmp_path), "MCP_CATALOG_PATH": str(tmp_path / "catalog.json")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(t["name"] for t in json.loads(proc.stdout)["tools"]) == TOOLS
    assert "Warning:" not in proc.stderr and "Error:" not in proc.stderr, proc.stderr[-3000:]


#: Shapes the tools return, written out by hand: an error of every kind (including the codes
#: arguments cannot provoke) and one success per tool.
ERROR_INSTANCES = [
    {"ok": False, "code": code, "message": "写入 global 时等待锁超过 10 秒,记忆库未被改动。"}
    for code in ("LOCK_TIMEOUT", "STORE_ERROR", "TOOL_ERROR", "UNKNOWN_TOOL", "INTERNAL_ERROR")
]
_RECORD = {
    "id": "0b5f3c1e-0000-4000-8000-000000000001",
    "shortId": "0b5f3c1e",
    "scope": "global",
    "kind": "rule",
    "content": "提交前先跑测试",
    "tags": [],
    "importance": None,
    "updatedAt": 1764000000000,
}
SUCCESS_INSTANCES = {
    "memory_save": {
        "ok": True,
        "id": _RECORD["id"],
        "deduped": False,
        "scope": "global",
        "kind": "rule",
        "superseded": None,
    },
    "memory_search": {
        "ok": True,
        "count": 1,
        "scopes": ["global"],
        "records": [{**_RECORD, "score": 0.5, "truncated": True, "contentChars": 50_000}],
    },
    "memory_list": {"ok": True, "count": 1, "total": 1, "scopes": ["global"], "records": [_RECORD]},
    "memory_get": {"ok": True, "count": 1, "records": [{**_RECORD, "importance": 0.9}], "missing": []},
    "memory_forget": {"ok": True, "deleted": 1, "ids": [_RECORD["id"]]},
}
#: Shapes that must NOT validate: a schema that accepts anything proves nothing.
INVALID_INSTANCES = [
    {"ok": False, "code": "TOPK_RANGE"},  # no message
    {"ok": True},  # success without its fields
    {"ok": "yes", "code": "X", "message": "m"},
]


def test_both_result_shapes_validate_under_every_output_schema_in_ajv(tmp_path, store_dir, project):
    steps: list[dict[str, Any]] = [{"op": "listTools"}]
    expected: list[tuple[str, Any, bool]] = []
    for tool in TOOLS:
        for instance in [*ERROR_INSTANCES, SUCCESS_INSTANCES[tool]]:
            expected.append((tool, instance, True))
        for instance in INVALID_INSTANCES:
            expected.append((tool, instance, False))
    steps += [{"op": "validate", "tool": tool, "instance": instance} for tool, instance, _ in expected]
    out = drive(stdio_target(store_dir, tmp_path / "err.log", project=project), steps, workdir=tmp_path)
    for (tool, instance, valid), verdict in zip(expected, _results(out)[1:], strict=True):
        assert verdict["valid"] is valid, (tool, instance, verdict["errorMessage"])


def test_both_result_shapes_validate_under_every_output_schema_in_python_jsonschema(tmp_path, store_dir, project):
    from jsonschema.validators import validator_for

    from tests.helpers.mcp_session import server_params, stdio_session

    with stdio_session(server_params(store_dir, project=project), tmp_path / "err.log") as s:
        schemas = {t.name: t.output_schema for t in s.list_tools().tools}
    assert sorted(schemas) == TOOLS
    for tool, schema in schemas.items():
        cls = validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
        for instance in [*ERROR_INSTANCES, SUCCESS_INSTANCES[tool]]:
            assert not list(validator.iter_errors(instance)), (tool, instance)
        for instance in INVALID_INSTANCES:
            assert list(validator.iter_errors(instance)), (tool, instance)


def test_no_schema_uses_a_type_array():
    from dsh_memory_mcp.service.schemas import TOOL_SPECS

    def walk(node: Any, path: str) -> list[str]:
        if isinstance(node, dict):
            found = [path] if isinstance(node.get("type"), list) else []
            return found + [p for k, v in node.items() for p in walk(v, f"{path}.{k}")]
        if isinstance(node, list):
            return [p for i, v in enumerate(node) for p in walk(v, f"{path}[{i}]")]
        return []

    arrays = [p for spec in TOOL_SPECS for p in walk([spec.input_schema, spec.output_schema], spec.name)]
    assert arrays == []


def test_ci_installs_the_typescript_package_with_npm_ci():
    run = (TS_DIR.parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "npm ci --prefix tests/ts" in run and "export CI=true" in run
    assert "node_modules" in (TS_DIR.parent.parent / ".gitignore").read_text(encoding="utf-8")


def test_the_typescript_client_s_roots_name_the_project_and_its_client_info_is_recorded(tmp_path, store_dir):
    cwd, app, other = (tmp_path / name for name in ("cwd", "应用", "other"))
    for path in (cwd, app, other):
        path.mkdir()
    roots = [{"uri": app.as_uri(), "name": "app"}, {"uri": other.as_uri(), "name": "other"}]
    out = drive(
        stdio_target(store_dir, tmp_path / "err.log", cwd=cwd),
        [
            {"op": "listTools"},
            _call("memory_save", {"content": "TS 宿主保存的项目记忆", "scope": "project"}),
            {"op": "setRoots", "roots": [{"uri": other.as_uri()}]},
            {
                "op": "callUntil",
                "name": "memory_list",
                "arguments": {},
                "path": "structuredContent.scopes.0",
                "equals": f"project:{other}",
            },
        ],
        workdir=tmp_path,
        roots=roots,
        client_info={"name": "ts-host", "version": "9.8.7"},
    )
    _, saved, _, moved = _results(out)
    assert saved["structuredContent"]["scope"] == f"project:{app}"
    assert _text(saved).endswith("[来自 客户端 roots]")
    assert moved["structuredContent"]["scopes"] == [f"project:{other}", "global"]
    assert out["rootsRequests"] >= 2
    (line,) = (store_dir / "projects").glob("*.jsonl")
    assert json.loads(line.read_text(encoding="utf-8"))["source"] == {"origin": "explicit", "client": "ts-host/9.8.7"}
    assert "(来源:客户端 roots,ts-host/9.8.7)" in (tmp_path / "err.log").read_text(encoding="utf-8")


def test_prompts_and_resources_reach_the_typescript_client(tmp_path, store_dir, project):
    store_dir.mkdir()
    rows = [
        new_record(scope="global", content=f"第 {i} 条全局记忆:部署脚本在 ops/ 目录", kind="fact").raw
        for i in range(120)
    ]
    (store_dir / "global.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    rid = json.loads(rows[7])["id"]
    out = drive(
        stdio_target(store_dir, tmp_path / "err.log", project=project),
        [
            {"op": "listPrompts"},
            {"op": "getPrompt", "name": "recall", "arguments": {"topic": "部署脚本"}},
            {"op": "getPrompt", "name": "remember", "arguments": {"what": "周五不发版"}},
            {"op": "getPrompt", "name": "recall", "arguments": {}},
            {"op": "listResources"},
            {"op": "listResourceTemplates"},
            {"op": "readResource", "uri": "memory://global"},
            {"op": "readResource", "uri": "memory://project"},
            {"op": "readResource", "uri": f"memory://record/{rid}"},
            {"op": "readResource", "uri": "memory://scope/global"},
            {"op": "readResource", "uri": "memory://nope"},
        ],
        workdir=tmp_path,
    )
    steps = out["steps"]
    prompts = steps[0]["result"]["prompts"]
    assert [(p["name"], p["arguments"][0]["name"]) for p in prompts] == [("recall", "topic"), ("remember", "what")]
    recall = steps[1]["result"]["messages"][0]
    assert recall["role"] == "user" and "「部署脚本」" in recall["content"]["text"]
    assert "部署脚本在 ops/ 目录" in recall["content"]["text"]
    remember = steps[2]["result"]["messages"][0]["content"]["text"]
    assert "周五不发版" in remember and "memory_save" in remember and "kind" in remember and "scope" in remember
    assert steps[3]["threw"]["code"] == -32602 and "topic" in steps[3]["threw"]["message"]
    first_page = steps[4]["result"]
    uris = [r["uri"] for r in first_page["resources"]]
    assert uris[:2] == ["memory://global", "memory://project"] and len(uris) == 100
    assert first_page["nextCursor"]
    templates = sorted(t["uriTemplate"] for t in steps[5]["result"]["resourceTemplates"])
    assert templates == ["memory://record/{id}", "memory://scope/{scope}"]
    global_text = steps[6]["result"]["contents"][0]["text"]
    assert global_text.startswith("共 120 条记忆(范围:global")
    assert steps[7]["result"]["contents"][0]["text"].startswith(f"没有记忆(范围:{project} [来自 --project])")
    record_text = steps[8]["result"]["contents"][0]["text"]
    assert record_text.startswith("找到 1 条记忆") and "第 7 条全局记忆" in record_text
    assert steps[9]["result"]["contents"][0]["text"] == global_text
    assert steps[10]["threw"]["code"] == -32602 and "UNKNOWN_RESOURCE" in steps[10]["threw"]["message"]

    second = drive(
        stdio_target(store_dir, tmp_path / "err2.log", project=project),
        [{"op": "listResources", "cursor": first_page["nextCursor"]}],
        workdir=tmp_path,
    )
    rest = second["steps"][0]["result"]
    assert len(rest["resources"]) == 22 and "nextCursor" not in rest
    all_ids = {u[len("memory://record/") :] for u in uris[2:]} | {
        r["uri"][len("memory://record/") :] for r in rest["resources"]
    }
    assert all_ids == {json.loads(row)["id"] for row in rows}
