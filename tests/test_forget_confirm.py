"""Bulk forget with a preview: through the official client (in memory; over real stdio where the
server's own start-up warning is the point), and the human CLI.

`memory_forget` by `query` matching more than `DSH_MEMORY_FORGET_CONFIRM_OVER` (3) live records
deletes nothing and answers `CONFIRM_REQUIRED` with the list; `confirm: true` deletes the records
that match at that moment. Deleting by id never asks.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from dsh_memory_mcp.errors import ERROR_CODES
from tests.conftest import PYTHON, subprocess_env
from tests.helpers.mcp_session import memory_session, server_params, stdio_session


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "workspace" / "app"
    path.mkdir(parents=True)
    return path


def _save(s, content: str) -> str:
    result = s.call("memory_save", {"content": content, "scope": "global"})
    assert not result.is_error, result.content[0].text
    return result.structured_content["id"]


def test_a_query_matching_more_than_three_deletes_nothing_and_lists_them_until_confirmed(tmp_path, store_dir, project):
    with memory_session(store_dir, project=project) as s:
        ids = {_save(s, f"Docker 镜像规则 {i}") for i in range(5)}
        keep = _save(s, "完全无关的一条")
        before = (store_dir / "global.jsonl").read_bytes()

        preview = s.call("memory_forget", {"query": "docker", "scope": "global"})
        assert preview.is_error
        sc = preview.structured_content
        assert sc["ok"] is False and sc["code"] == "CONFIRM_REQUIRED" and "CONFIRM_REQUIRED" in ERROR_CODES
        assert sc["count"] == 5 and {r["id"] for r in sc["records"]} == ids and sc["scope"] == "global"
        assert "confirm: true" in sc["message"]
        # TypeScript hosts validate structuredContent against outputSchema even on errors.
        schema = next(t for t in s.list_tools().tools if t.name == "memory_forget").output_schema
        jsonschema.validate(sc, schema)
        text = preview.content[0].text
        assert text.startswith("错误 CONFIRM_REQUIRED:") and all(i[:8] in text for i in ids)
        assert (store_dir / "global.jsonl").read_bytes() == before  # nothing deleted

        done = s.call("memory_forget", {"query": "docker", "scope": "global", "confirm": True})
        assert not done.is_error, done.content[0].text
        assert done.structured_content["deleted"] == 5 and set(done.structured_content["ids"]) == ids
        left = [json.loads(line)["id"] for line in (store_dir / "global.jsonl").read_text("utf-8").splitlines()]
        assert left == [keep]


def test_three_matches_go_at_once_and_an_id_never_asks(tmp_path, store_dir, project):
    with memory_session(store_dir, project=project) as s:
        for i in range(3):
            _save(s, f"redis 连接池 {i}")
        many = [_save(s, f"kafka 主题 {i}") for i in range(6)]
        three = s.call("memory_forget", {"query": "REDIS", "scope": "global"})
        assert not three.is_error and three.structured_content["deleted"] == 3
        one = s.call("memory_forget", {"id": many[0][:8]})
        assert not one.is_error and one.structured_content["ids"] == [many[0]]
        wrong = s.call("memory_forget", {"query": "kafka", "scope": "global", "confirm": "maybe"})
        assert wrong.is_error and wrong.structured_content["code"] == "TOOL_ERROR"
        no = s.call("memory_forget", {"query": "kafka", "scope": "global", "confirm": False})
        assert no.structured_content["code"] == "CONFIRM_REQUIRED" and no.structured_content["count"] == 5


def test_confirm_deletes_what_matches_then_including_a_record_saved_after_the_preview(tmp_path, store_dir, project):
    with memory_session(store_dir, project=project) as s:
        for i in range(4):
            _save(s, f"nginx 配置 {i}")
        assert s.call("memory_forget", {"query": "nginx", "scope": "global"}).structured_content["count"] == 4
        late = _save(s, "nginx 配置 late")
        done = s.call("memory_forget", {"query": "nginx", "scope": "global", "confirm": True})
        assert done.structured_content["deleted"] == 5 and late in done.structured_content["ids"]


def test_the_threshold_comes_from_the_environment_and_a_bad_value_is_warned_about(tmp_path, store_dir, project):
    params = server_params(store_dir, project=project, DSH_MEMORY_FORGET_CONFIRM_OVER="1")
    with stdio_session(params, tmp_path / "err.log") as s:
        _save(s, "vue 组件 a")
        _save(s, "vue 组件 b")
        result = s.call("memory_forget", {"query": "vue", "scope": "global"})
        assert result.structured_content["code"] == "CONFIRM_REQUIRED" and result.structured_content["count"] == 2
    params = server_params(store_dir, project=project, DSH_MEMORY_FORGET_CONFIRM_OVER="lots")
    with stdio_session(params, tmp_path / "err2.log") as s:
        assert s.call("memory_forget", {"query": "vue", "scope": "global"}).structured_content["deleted"] == 2
    err = (tmp_path / "err2.log").read_text(encoding="utf-8")
    assert "DSH_MEMORY_FORGET_CONFIRM_OVER='lots' 不是 0~1000000 之间的整数,已忽略,改用缺省值 3" in err


def test_the_tool_description_and_schema_teach_the_protocol(tmp_path, store_dir, project):
    with memory_session(store_dir, project=project) as s:
        tool = next(t for t in s.list_tools().tools if t.name == "memory_forget")
    assert "CONFIRM_REQUIRED" in tool.description and "confirm=true" in tool.description
    assert tool.input_schema["properties"]["confirm"]["type"] == "boolean"


def test_the_human_forget_previews_exits_1_and_deletes_with_confirm(tmp_path, store_dir):
    env = subprocess_env(DSH_MEMORY_STORE_DIR=str(store_dir))
    lines = "".join(
        json.dumps({"id": f"{i:08d}-aaaa-bbbb-cccc-dddddddddddd", "scope": "global", "content": f"java 规范 {i}"})
        + "\n"
        for i in range(4)
    )
    store_dir.mkdir()
    (store_dir / "global.jsonl").write_text(lines, encoding="utf-8")

    def forget(*extra: str) -> subprocess.CompletedProcess[str]:
        command = [PYTHON, "-m", "dsh_memory_mcp", "forget", "--query", "java", "--scope", "global", *extra]
        return subprocess.run(command, capture_output=True, text=True, encoding="utf-8", env=env, timeout=60)

    preview = forget()
    # More than one match: the list first (stdout), nothing deleted, exit 1 naming --yes (--confirm too).
    assert preview.returncode == 1 and "java 规范 3" in preview.stdout
    assert "没有删除任何记忆" in preview.stderr and "--yes" in preview.stderr
    assert (store_dir / "global.jsonl").read_text(encoding="utf-8") == lines
    done = forget("--confirm")
    assert done.returncode == 0, done.stderr
    assert (store_dir / "global.jsonl").read_text(encoding="utf-8") == ""
