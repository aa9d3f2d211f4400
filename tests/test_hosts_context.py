"""The per-session call context with the official Python client: the project from the host's roots,
the memory digest in `instructions`, and provenance (`source.client`) from `clientInfo`.

Real servers over stdio (`python -m dsh_memory_mcp`), and one in-process `MCPServer` shared by two
sessions (what `serve` does over Streamable HTTP) to show the roots are kept per session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import Implementation, ListRootsResult, Root

from dsh_memory_mcp import config
from dsh_memory_mcp.service import digest
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.store.records import new_record, now_ms
from dsh_memory_mcp.store.scopes import project_key, scope_file_relpath
from dsh_memory_mcp.transports.mcp_server import MemoryServer, root_dir
from tests.helpers.mcp_session import server_params, stdio_session
from tests.helpers.polling import until


class Roots:
    """A host's workspace folders: answers `roots/list` and counts how often it was asked."""

    def __init__(self, *uris: str) -> None:
        self.uris = list(uris)
        self.asked = 0

    async def __call__(self, context: Any) -> ListRootsResult:
        self.asked += 1
        return ListRootsResult(roots=[Root(uri=uri, name=f"root{i}") for i, uri in enumerate(self.uris)])


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    out = {name: tmp_path / name for name in ("cwd", "app", "other", "flag")}
    for path in out.values():
        path.mkdir()
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# The Python SDK marks roots deprecated for the 2026-07-28 protocol; today's hosts (handshake 2025-11-25) use them.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def test_the_first_file_root_is_the_project_and_a_roots_change_moves_it(tmp_path, store_dir, dirs):
    roots = Roots(dirs["app"].as_uri(), dirs["other"].as_uri())
    params = server_params(store_dir, cwd=dirs["cwd"])
    with stdio_session(params, tmp_path / "err.log", list_roots_callback=roots) as s:
        saved = s.call("memory_save", {"content": "这个仓库用 uv 管理依赖", "scope": "project"})
        assert saved.structured_content["scope"] == f"project:{dirs['app']}"
        assert saved.content[0].text.endswith(f"@ project:{dirs['app']} [来自 客户端 roots]")
        found = s.call("memory_search", {"query": "uv 依赖"})
        assert found.structured_content["scopes"] == [f"project:{dirs['app']}", "global"]
        assert f"检索范围:{dirs['app']} [来自 客户端 roots], global" in found.content[0].text

        roots.uris = [dirs["other"].as_uri()]
        s.portal.call(s.session.send_roots_list_changed)
        moved = until(  # the notification is handled asynchronously
            "the project follows notifications/roots/list_changed",
            lambda: (
                (r := s.call("memory_list", {})).structured_content["scopes"][0] == f"project:{dirs['other']}" and r
            ),
            timeout=5.0,
        )
        assert moved.structured_content["count"] == 0  # the memory stayed with the first workspace
    err = (tmp_path / "err.log").read_text(encoding="utf-8")
    assert f"project = {dirs['app']}(来源:客户端 roots" in err
    assert f"project = {dirs['other']}(来源:客户端 roots" in err
    assert "来源:工作目录" in err  # the start-up line names the fallback it started with
    assert (store_dir / scope_file_relpath(project_key(str(dirs["app"]), "/"))).is_file()


def test_the_project_flag_wins_over_roots_and_roots_are_never_asked(tmp_path, store_dir, dirs):
    roots = Roots(dirs["app"].as_uri())
    with stdio_session(
        server_params(store_dir, project=dirs["flag"], cwd=dirs["cwd"]), tmp_path / "err.log", list_roots_callback=roots
    ) as s:
        saved = s.call("memory_save", {"content": "flag project", "scope": "project"})
    assert saved.structured_content["scope"] == f"project:{dirs['flag']}"
    assert saved.content[0].text.endswith("[来自 --project]")
    assert roots.asked == 0


def test_the_environment_variable_wins_over_roots_too(tmp_path, store_dir, dirs):
    roots = Roots(dirs["app"].as_uri())
    params = server_params(store_dir, cwd=dirs["cwd"], DSH_MEMORY_PROJECT=str(dirs["flag"]))
    with stdio_session(params, tmp_path / "err.log", list_roots_callback=roots) as s:
        saved = s.call("memory_save", {"content": "env project", "scope": "project"})
    assert saved.content[0].text.endswith(f"@ project:{dirs['flag']} [来自 DSH_MEMORY_PROJECT]")
    assert roots.asked == 0


def test_without_roots_the_working_directory_is_the_project(tmp_path, store_dir, dirs):
    with stdio_session(server_params(store_dir, cwd=dirs["cwd"]), tmp_path / "err.log") as s:
        saved = s.call("memory_save", {"content": "cwd project", "scope": "project"})
    assert saved.content[0].text.endswith(f"@ project:{dirs['cwd']} [来自 工作目录]")


def test_a_client_whose_roots_list_fails_keeps_the_working_directory(tmp_path, store_dir, dirs):
    roots = Roots("https://example.com/repo")  # the Python client cannot send it: roots/list answers an error
    with stdio_session(server_params(store_dir, cwd=dirs["cwd"]), tmp_path / "err.log", list_roots_callback=roots) as s:
        saved = s.call("memory_save", {"content": "no file root", "scope": "project"})
    assert saved.structured_content["scope"] == f"project:{dirs['cwd']}"
    assert roots.asked >= 1


def test_file_uris_become_paths():
    assert root_dir("file:///home/a/my%20app") == "/home/a/my app"
    assert root_dir("file:///C:/work/app") == "C:/work/app"
    assert root_dir("file://server/share/app") == "//server/share/app"
    assert root_dir("file://localhost/srv/x") == "/srv/x"
    assert root_dir("vscode-remote://ssh/x") is None


def test_one_server_keeps_the_roots_of_each_session_apart(tmp_path, store_dir, dirs):
    settings = config.resolve_settings(store_dir=str(store_dir), cwd=str(dirs["cwd"]), env={"DSH_MEMORY_VECTOR": "off"})
    service = open_service(settings)
    server = MemoryServer(service)
    first, second = Roots(dirs["app"].as_uri()), Roots(dirs["other"].as_uri())

    async def main() -> tuple[Any, Any, Any]:
        async with (
            Client(server.server, mode="legacy", list_roots_callback=first) as a,
            Client(server.server, mode="legacy", list_roots_callback=second) as b,
        ):
            ra = await a.call_tool("memory_save", {"content": "A 会话", "scope": "project"})
            rb = await b.call_tool("memory_save", {"content": "B 会话", "scope": "project"})
            again = await a.call_tool("memory_list", {})
            return ra, rb, again

    try:
        ra, rb, again = anyio.run(main)
    finally:
        close_service(service)
    assert ra.structured_content["scope"] == f"project:{dirs['app']}"
    assert rb.structured_content["scope"] == f"project:{dirs['other']}"
    assert again.structured_content["scopes"][0] == f"project:{dirs['app']}"
    assert [r["content"] for r in again.structured_content["records"]] == ["A 会话"]


# -- provenance ------------------------------------------------------------------------------------


def test_records_carry_the_clients_name_and_version_and_others_records_are_untouched(tmp_path, store_dir, dirs):
    store_dir.mkdir()
    foreign = new_record(scope="global", content="DSH 插件写的记忆", kind="rule", source={"origin": "auto"}).raw
    (store_dir / "global.jsonl").write_text(foreign + "\n", encoding="utf-8")
    info = Implementation(name="my-host", version="2.1.0")
    with stdio_session(server_params(store_dir, project=dirs["flag"]), tmp_path / "err.log", client_info=info) as s:
        rid = s.call("memory_save", {"content": "我们写的记忆", "kind": "fact"}).structured_content["id"]
        got = s.call("memory_get", {"ids": [rid]})
    lines = (store_dir / "global.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines[0] == foreign
    assert json.loads(lines[1])["source"] == {"origin": "explicit", "client": "my-host/2.1.0"}
    assert got.structured_content["records"][0]["source"] == {"origin": "explicit", "client": "my-host/2.1.0"}
    assert "来源:explicit · my-host/2.1.0" in got.content[0].text


# -- the digest in instructions --------------------------------------------------------------------


def _seed(store_dir: Path, project: Path) -> dict[str, str]:
    """Standing and non-standing memories in global and the project, written as DSH would."""
    now = now_ms()
    pkey = project_key(str(project), "/")
    rows = {
        "rule": new_record(scope="global", content="提交前必须跑完整测试", kind="rule", importance=0.9, now=now),
        "pref": new_record(scope="global", content="回复一律用中文", kind="preference", now=now),
        "note": new_record(scope="global", content="昨天下午下过雨", kind="note", now=now),
        "vip": new_record(scope="global", content="生产库只读账号叫 ro_user", kind="fact", importance=0.95, now=now),
        "old": new_record(scope="global", content="旧规则:用 pip 安装", kind="rule", now=now),
        "proj": new_record(scope=pkey, content="本项目的 API 前缀是 /v2", kind="decision", now=now),
    }
    data = json.loads(rows["old"].raw)
    data["expiredAt"] = now - 1000  # superseded
    lines_global = [rows[k].raw for k in ("rule", "pref", "note", "vip")] + [json.dumps(data, ensure_ascii=False)]
    (store_dir / "projects").mkdir(parents=True)
    (store_dir / "global.jsonl").write_text("\n".join(lines_global) + "\n", encoding="utf-8")
    (store_dir / scope_file_relpath(pkey)).write_text(rows["proj"].raw + "\n", encoding="utf-8")
    return {k: r.short_id for k, r in rows.items()}


def test_instructions_carry_the_standing_memories_most_important_first(tmp_path, store_dir, dirs):
    ids = _seed(store_dir, dirs["flag"])
    with stdio_session(server_params(store_dir, project=dirs["flag"]), tmp_path / "err.log") as s:
        text = s.init.instructions or ""
    assert text.startswith(digest.USAGE)
    body = text[len(digest.USAGE) :]
    assert "提交前必须跑完整测试" in body and "回复一律用中文" in body and "本项目的 API 前缀是 /v2" in body
    assert "生产库只读账号叫 ro_user" in body  # importance >= 0.8, whatever the kind
    assert "昨天下午下过雨" not in body and "旧规则" not in body  # a plain note; a superseded rule
    assert body.index(ids["vip"]) < body.index(ids["rule"]) < body.index(ids["pref"])
    assert "[项目·decision]" in body and "[global·rule]" in body
    assert len(body) <= digest.DIGEST_CHARS + 2


def test_the_digest_is_bounded_and_says_how_many_it_left_out(tmp_path, store_dir, dirs):
    store_dir.mkdir()
    rows = [
        new_record(scope="global", content=f"第 {i} 条规则:" + "很长的说明" * 30, kind="rule").raw for i in range(40)
    ]
    (store_dir / "global.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with stdio_session(server_params(store_dir, project=dirs["flag"]), tmp_path / "err.log") as s:
        body = (s.init.instructions or "")[len(digest.USAGE) :]
    assert len(body) <= digest.DIGEST_CHARS + 2
    assert "条未列出" in body
    shown = body.count("[global·rule]")
    assert 3 <= shown < 40 and f"另有 {40 - shown} 条未列出" in body


def test_the_digest_can_be_turned_off(tmp_path, store_dir, dirs):
    _seed(store_dir, dirs["flag"])
    params = server_params(store_dir, project=dirs["flag"], DSH_MEMORY_DIGEST="off")
    with stdio_session(params, tmp_path / "err.log") as s:
        assert s.init.instructions == digest.USAGE


def test_a_roots_client_gets_a_global_only_digest(tmp_path, store_dir, dirs):
    _seed(store_dir, dirs["cwd"])
    roots = Roots(dirs["app"].as_uri())
    with stdio_session(server_params(store_dir, cwd=dirs["cwd"]), tmp_path / "err.log", list_roots_callback=roots) as s:
        body = (s.init.instructions or "")[len(digest.USAGE) :]
    assert "提交前必须跑完整测试" in body
    assert "本项目的 API 前缀是 /v2" not in body  # the cwd's project is not the workspace roots will name


# -- prompts and resources -------------------------------------------------------------------------


def test_prompts_and_resources_follow_the_sessions_roots_in_the_python_client(tmp_path, store_dir, dirs):
    roots = Roots(dirs["app"].as_uri())
    params = server_params(store_dir, cwd=dirs["cwd"])
    with stdio_session(params, tmp_path / "err.log", list_roots_callback=roots) as s:
        s.call("memory_save", {"content": "应用的数据库是 PostgreSQL 16", "scope": "project"})
        s.call("memory_save", {"content": "cwd 不该出现", "path": str(dirs["cwd"])})
        prompts = s.portal.call(s.session.list_prompts)
        recall = s.portal.call(s.session.get_prompt, "recall", {"topic": "数据库"})
        listed = s.portal.call(s.session.list_resources)
        project = s.portal.call(s.session.read_resource, "memory://project")
    assert [p.name for p in prompts.prompts] == ["recall", "remember"]
    text = recall.messages[0].content.text
    assert "PostgreSQL 16" in text and f"{dirs['app']} [来自 客户端 roots]" in text
    by_uri = {str(r.uri): r for r in listed.resources}
    assert by_uri["memory://project"].title == f"当前项目的记忆:{dirs['app']}"
    body = project.contents[0].text
    assert "PostgreSQL 16" in body and "cwd 不该出现" not in body


def test_a_second_start_takes_the_digest_from_the_cache_until_a_file_changes(tmp_path, store_dir, dirs):
    _seed(store_dir, dirs["flag"])
    params = server_params(store_dir, project=dirs["flag"])
    with stdio_session(params, tmp_path / "err1.log") as s:
        first = s.init.instructions or ""
    cache_dir = tmp_path / "xdg-state" / "dsh-memory-mcp" / "digest"
    (entry_path,) = cache_dir.glob("*.json")
    assert oct(entry_path.stat().st_mode & 0o777) == "0o600"
    entry = json.loads(entry_path.read_text(encoding="utf-8"))
    assert entry["text"] and entry["text"] in first
    entry["text"] = "缓存里的摘要(被测试改过)"  # same file identities: the next start must use it as is
    entry_path.write_text(json.dumps(entry, ensure_ascii=False), encoding="utf-8")
    with stdio_session(params, tmp_path / "err2.log") as s:
        assert s.init.instructions == f"{digest.USAGE}\n\n缓存里的摘要(被测试改过)"
    with (store_dir / "global.jsonl").open("a", encoding="utf-8") as fh:  # another writer adds a rule
        fh.write(new_record(scope="global", content="新规则:周五不发版", kind="rule").raw + "\n")
    with stdio_session(params, tmp_path / "err3.log") as s:
        third = s.init.instructions or ""
    assert "新规则:周五不发版" in third and "被测试改过" not in third
