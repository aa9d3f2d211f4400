"""The human subcommands, each run as a real `python -m dsh_memory_mcp <command>` subprocess.

The store is seeded with a real `SharedStore` in the test process; what the commands print is
compared with what the very same tools return in process (same rendering), and the files they
leave behind are read back byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_memory_mcp import config
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.store.records import now_ms
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, subprocess_env
from tests.helpers.fake_llama import FakeLlama, free_port
from tests.helpers.fake_llama_exe import make_stand_in, read_spawns, wait_gone

#: A person's own command writes its diagnostics without the program prefix (the server's lines keep it).
P = ""
TIMEOUT = 60


# ------------------------------------------------------------------------------------------------
# helpers


@pytest.fixture
def project(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def env(project: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(DSH_MEMORY_PROJECT=str(project), **extra)


def run(project: Path, *args: str, stdin: bytes | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        env=env(project, **extra),
        cwd=str(project),
        timeout=TIMEOUT,
    )
    return subprocess.CompletedProcess(
        result.args, result.returncode, result.stdout.decode("utf-8"), result.stderr.decode("utf-8")
    )


def run_bytes(project: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args],
        input=b"",
        capture_output=True,
        env=env(project, **extra),
        cwd=str(project),
        timeout=TIMEOUT,
    )


def service_for(store_dir: Path, project: Path) -> MemoryService:
    """The tools as the subprocess sees them (vectors off), to compute the expected output."""
    settings = config.resolve_settings(
        store_dir=str(store_dir), env={"DSH_MEMORY_VECTOR": "off", "DSH_MEMORY_PROJECT": str(project)}
    )
    return MemoryService(settings=settings, store=SharedStore(str(store_dir)))


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def seed(store: SharedStore, project: Path) -> dict[str, str]:
    """A store with global, project and custom scopes, an expired record and a foreign field."""
    key = f"project:{project}"
    ids = {
        "docker": store.save(
            "global", "Docker images are built with buildx", kind="procedure", tags=["docker"]
        ).record.id,
        "uv": store.save(key, "This project uses uv for packaging", kind="decision", importance=0.9).record.id,
        "custom": store.save("team notes", "standup is at 9:30", kind="fact").record.id,
        "old": store.save("global", "the editor theme is light").record.id,
    }
    ids["new"] = store.save("global", "the editor theme is dark", supersedes=ids["old"], kind="preference").record.id
    foreign = (
        '{"id":"0f0f0f0f-aaaa-4bbb-8ccc-123456789abc","scope":"global","kind":"note","content":"written by DSH",'
        '"tags":[],"source":{"origin":"dsh"},"createdAt":1,"updatedAt":2,"lastAccessedAt":3,"accessCount":0,'
        '"x-dsh":{"weight":1.5}}'
    )
    with open(store.scope_path("global"), "a", encoding="utf-8") as f:
        f.write(foreign + "\n")
    ids["foreign"] = "0f0f0f0f-aaaa-4bbb-8ccc-123456789abc"
    return ids


# ------------------------------------------------------------------------------------------------
# read-only commands on a missing store


@pytest.mark.parametrize(
    "args",
    [["list"], ["search", "docker"], ["get", "0f0f0f0f"], ["export"], ["stats"], ["list", "--json"]],
    ids=lambda a: " ".join(a),
)
def test_a_read_only_command_on_a_missing_store_exits_1_naming_it_and_creates_nothing(
    tmp_path: Path, project: Path, store_dir: Path, args: list[str]
) -> None:
    before = tree(tmp_path)
    result = run(project, *args)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{P}❌ 记忆库目录不存在:{store_dir}",
        f"{P}⇒ 用 --store-dir <目录> 或环境变量 DSH_MEMORY_STORE_DIR 指向已有的记忆库;本命令不会创建它",
    ]
    assert not store_dir.exists()
    assert tree(tmp_path) == before


def test_store_dir_flag_wins_and_a_missing_one_is_named(project: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    result = run(project, "stats", "--store-dir", str(elsewhere))
    assert result.returncode == 1
    assert f"记忆库目录不存在:{elsewhere}" in result.stderr
    assert not elsewhere.exists()


# ------------------------------------------------------------------------------------------------
# list / search / get / forget: the tools' rendering


def test_list_prints_exactly_the_tools_text_and_json_prints_its_structured_content(
    store: SharedStore, store_dir: Path, project: Path
) -> None:
    seed(store, project)
    service = service_for(store_dir, project)
    cases = [
        ([], {}),
        (["--scope", "all"], {"scope": "all"}),
        (["--scope", "global", "--kind", "preference"], {"scope": "global", "kind": "preference"}),
        (["--path", str(project), "--limit", "1"], {"path": str(project), "limit": "1"}),
    ]
    for argv, tool_args in cases:
        expected = service.call("memory_list", tool_args)
        result = run(project, "list", *argv)
        # At a terminal: `(scope · kind)` instead of `(scope/kind)`, a space before the kind in the count.
        human = re.sub(r"^\((.+)/(\w+)\) ", r"(\1 · \2) ", expected.text, flags=re.M)
        human = re.sub(r"条(\w+) 类记忆", r"条 \1 类记忆", human)
        # Projects by their folder's name (the whole path under --long).
        human = human.replace(f"(project:{project} · ", f"({project.name} · ").replace(
            f"{project} [", f"{project.name} ["
        )
        assert (result.returncode, result.stdout, result.stderr) == (0, human + "\n", ""), argv
        as_json = run(project, "list", *argv, "--json")
        assert as_json.returncode == 0
        assert json.loads(as_json.stdout) == expected.structured
        assert as_json.stdout.count("\n") == 1  # one object, one line
    text = run(project, "list", "--scope", "all").stdout
    assert "the editor theme is light" not in text  # superseded: hidden, like the tool
    assert "\n(global · preference) the editor theme is dark\n" in text
    assert f"\n({project.name} · decision) This project uses uv for packaging\n" in text
    long = run(project, "list", "--scope", "all", "--long").stdout
    assert f"\n(project:{project} · decision) This project uses uv for packaging\n" in long
    kind = run(project, "list", "--scope", "global", "--kind", "preference").stdout
    assert kind.startswith("共 1 条 preference 类记忆(范围:global")
    none = run(project, "list", "--scope", "global", "--kind", "rule").stdout
    assert none == "没有 rule 类记忆(范围:global)\n"


def test_a_tool_error_is_its_text_on_stderr_or_the_error_object_with_json_and_exit_1(
    store: SharedStore, project: Path
) -> None:
    seed(store, project)
    result = run(project, "list", "--limit", "0")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"{P}错误 LIMIT_RANGE:limit 必须是 1~200 之间的整数")
    as_json = run(project, "list", "--kind", "bogus", "--json")
    assert as_json.returncode == 1
    error = json.loads(as_json.stdout)
    assert error["ok"] is False and error["code"] == "KIND_INVALID"
    assert run(project, "search", "x", "--scope", "global", "--path", str(project)).returncode == 1
    no_query = run(project, "search", "--json")
    assert no_query.returncode == 2  # an argument error, as the help says
    assert json.loads(no_query.stdout)["code"] == "QUERY_EMPTY"


def test_search_finds_with_the_tools_ranking_and_counts_the_hit(store: SharedStore, project: Path) -> None:
    ids = seed(store, project)
    result = run(project, "search", "docker", "images", "--top-k", "3")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"找到 1 条记忆(检索范围:{project.name} [来自 DSH_MEMORY_PROJECT], global)"
    assert lines[2].endswith("(global · procedure) Docker images are built with buildx")
    # The score as the page shows it: a percentage capped at 100, never a raw number like [1.2000].
    assert re.fullmatch(r"\[相关度 (100|[1-9]?[0-9])%\] \(global · procedure\) .*", lines[2]), lines[2]
    assert lines[3] == f"  id={ids['docker'][:8]} tags=docker updated=" + lines[3].split("updated=")[1]
    assert lines[-1] == "提示:需要完整内容时运行 dsh-memory-mcp get <上面的 8 位 id 前缀>。"
    as_json = json.loads(run(project, "search", "buildx", "--topk=1", "--scope", "all", "--json").stdout)
    assert as_json["count"] == 1 and as_json["records"][0]["id"] == ids["docker"]
    # The hits were touched like the tool's (flushed when the command closed the store).
    hit = next(r for r in store.snapshot("global").records if r.id == ids["docker"])
    assert hit.access_count == 2
    nothing = run(project, "search", "kubernetes")
    assert (nothing.returncode, nothing.stdout) == (
        0,
        f"没有找到相关记忆(检索范围:{project.name} [来自 DSH_MEMORY_PROJECT], global)\n",
    )


def test_a_content_line_that_looks_like_a_block_head_is_printed_as_it_was_written(
    store: SharedStore, project: Path
) -> None:
    # The terminal's `(scope · kind)` heads are rendered as such, not patched into the tools' text
    # afterwards: a memory's own line that reads like a head stays exactly as saved.
    content = "(global/note) 这一行是内容,不是标题\n共 3 条note 类记忆也是内容"
    ident = store.save("global", content).record.id
    got = run(project, "get", ident)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert lines[2] == f"(global · note) id={ident}"
    assert lines[3:5] == content.splitlines()
    listed = run(project, "list", "--scope", "global", "--kind", "note").stdout
    assert listed.startswith("共 1 条 note 类记忆(范围:global")
    # At a terminal a record's lines stay lines, each after the first indented under the block's head.
    assert "\n(global · note) (global/note) 这一行是内容,不是标题\n    共 3 条note 类记忆也是内容\n" in listed


def test_scopes_named_on_the_command_line_follow_the_tools_rules_and_codes(
    store: SharedStore, store_dir: Path, project: Path
) -> None:
    seed(store, project)
    service = service_for(store_dir, project)
    one = json.loads(run(project, "stats", "--scope", "project", "--json").stdout)
    assert [row["scope"] for row in one["scopes"]] == [f"project:{project}"]
    every = json.loads(run(project, "stats", "--scope", "all", "--json").stdout)
    assert {row["scope"] for row in every["scopes"]} >= {"global", f"project:{project}"}
    for argv, tool_args in (
        (["--scope", "a/b"], {"scope": "a/b"}),
        (["--scope", "global", "--path", str(project)], {"scope": "global", "path": str(project)}),
    ):
        expected = service.call("memory_list", tool_args)
        assert expected.is_error
        for command in ("stats", "export"):
            refused = run(project, command, *argv)
            assert refused.returncode == 1 and refused.stdout == "", (command, argv)
            assert refused.stderr == "".join(P + line + "\n" for line in expected.text.splitlines()), (command, argv)
    bad_word = run(project, "reembed", "a/b", DSH_MEMORY_VECTOR="on", DSH_MEMORY_EMBED_ENDPOINT="http://127.0.0.1:9")
    assert bad_word.returncode == 1 and "错误 SCOPE_INVALID" in bad_word.stderr
    into_all = run(
        project, "import", "-", "--scope", "all", stdin=b'{"type":"entity","name":"x","observations":["y"]}\n'
    )
    assert into_all.returncode == 1 and "错误 SCOPE_NOT_WRITABLE" in into_all.stderr


def test_get_takes_ids_and_prefixes_as_positionals_and_reports_the_missing(
    store: SharedStore, store_dir: Path, project: Path
) -> None:
    ids = seed(store, project)
    expected = service_for(store_dir, project).call("memory_get", {"ids": [ids["old"][:8], ids["uv"], "deadbeef00"]})
    result = run(project, "get", ids["old"][:8], ids["uv"], "deadbeef00")
    human = re.sub(r"^\((.+)/(\w+)\) ", r"(\1 · \2) ", expected.text, flags=re.M)
    # One id is missing: what was found is printed, and the exit code says not everything was.
    assert (result.returncode, result.stdout) == (
        1,
        human.replace(f"(project:{project} · ", f"({project.name} · ") + "\n",
    )
    long = run(project, "get", ids["old"][:8], ids["uv"], "deadbeef00", "--long")
    assert (long.returncode, long.stdout) == (1, human + "\n")
    assert run(project, "get", ids["old"][:8], ids["uv"]).returncode == 0
    assert "(已被取代/过期,检索中不再出现)" in result.stdout
    assert "未找到:deadbeef00" in result.stdout
    as_json = json.loads(run(project, "get", ids["foreign"], "--json").stdout)
    assert as_json["records"][0]["content"] == "written by DSH"
    empty = run(project, "get")
    assert empty.returncode == 1 and "IDS_EMPTY" in empty.stderr


def test_get_walks_a_long_memory_part_by_part_with_the_offset_the_output_names(
    store: SharedStore, project: Path
) -> None:
    # 45,000 characters, every one different from its neighbours' position: a part boundary off by one shows.
    content = "".join(chr(0x4E00 + i % 20000) for i in range(45_000))
    ident = store.save("global", content).record.id
    parts, offset, hints = [], 0, []
    for _ in range(4):  # 20,000 at a time: three parts, then the walk must have stopped
        args = ("get", ident) if offset == 0 else ("get", ident, "--offset", str(offset))
        result = run(project, *args)
        assert result.returncode == 0, result.stderr
        text = result.stdout
        found = re.search(r"下一段:dsh-memory-mcp get (\S+) --offset (\d+)", text)
        lines = text.split("\n")
        head = next(i for i, line in enumerate(lines) if f"id={ident}" in line)
        parts.append(lines[head + 1])  # the block's head line, then the part
        if found is None:
            assert "已到末尾" in text
            break
        assert found.group(1) == ident and "memory_get" not in text  # a terminal is told the command, not the tool
        hints.append(int(found.group(2)))
        offset = int(found.group(2))
    assert hints == [20_000, 40_000]
    assert "".join(parts) == content
    english = run(project, "get", ident, "--offset", "20000", LANG="en_US.UTF-8")
    assert f"the next part: dsh-memory-mcp get {ident} --offset 40000" in english.stdout
    assert run(project, "get", ident, "--offset", "-1").returncode == 2  # a dash word is a flag: a usage error
    bad = run(project, "get", ident, "--offset=-1")
    assert bad.returncode == 1 and "offset" in bad.stderr and "TOOL_ERROR" in bad.stderr


def test_forget_by_positional_id_by_flag_and_by_query(store: SharedStore, project: Path) -> None:
    ids = seed(store, project)
    # A person's forget goes to the trash (`DSH_MEMORY_TRASH_DAYS`, 30) and says how to restore it.
    short = ids["docker"][:8]
    by_position = run(project, "forget", short)
    assert (by_position.returncode, by_position.stdout) == (
        0,
        f"已删除 1 条记忆 {short} @ global\n已移到回收站,保留 30 天:可在网页的「回收站」恢复,"
        f"或运行 `dsh-memory-mcp recover --trash {short}`\n",
    )
    by_flag = json.loads(run(project, "forget", "--id", ids["custom"], "--json").stdout)
    assert by_flag == {"ok": True, "deleted": 1, "ids": [ids["custom"]], "trashDays": 30}
    by_query = run(project, "forget", "--query", "UV FOR", "--purge")  # current project, NFKC + any case
    assert by_query.stdout == f"已删除 1 条记忆 {ids['uv'][:8]} @ project:{project} [来自 DSH_MEMORY_PROJECT]\n"
    left = {r.id for s in store.discover_scopes() for r in store.snapshot(s).records}
    assert left == {ids["old"], ids["new"], ids["foreign"]}
    none = run(project, "forget", "--id", "0123456789")
    assert (none.returncode, none.stdout) == (0, "没有删除任何记忆:未找到 id 0123456789\n")
    assert run(project, "forget").returncode == 1  # TARGET_REQUIRED from the tool
    assert "TARGET_AMBIGUOUS" in run(project, "forget", "--id", ids["new"], "--query", "x").stderr
    for argv in (["forget", ids["new"], "--id", ids["new"]], ["forget", ids["new"], ids["old"]]):
        usage = run(project, *argv)
        assert usage.returncode == 2 and usage.stderr.startswith(f"{P}❌ 参数错误:"), argv
    assert ids["new"] in {r.id for r in store.snapshot("global").records}


def test_forget_on_a_missing_store_creates_it_like_the_server(project: Path, store_dir: Path) -> None:
    result = run(project, "forget", "--id", "0123456789")
    assert result.returncode == 0
    assert store_dir.is_dir()


# ------------------------------------------------------------------------------------------------
# export / import


def _scope_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl")) if not p.name.startswith(".")
    }


def test_export_then_import_into_an_empty_store_loses_nothing(
    store: SharedStore, store_dir: Path, project: Path, tmp_path: Path
) -> None:
    seed(store, project)
    store.save("session:abc", "a session memory")
    with open(store.scope_path("global"), "a", encoding="utf-8") as f:
        f.write("{not json at all\n")
    first = run_bytes(project, "export")
    assert first.returncode == 0, first.stderr
    err = first.stderr.decode()
    assert f"{P}导出完成:7 条记录,4 个作用域" in err
    assert f"{P}⚠️ 1 行损坏的行没有导出(仍原样留在记忆库文件里):global.jsonl 第 5 行" in err
    lines = first.stdout.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 8
    on_disk = {line for data in _scope_files(store_dir).values() for line in data.split(b"\n") if line}
    assert set(lines[:-1]) <= on_disk  # exactly the stored bytes
    assert any(b'"x-dsh":{"weight":1.5}' in line for line in lines)
    assert any(b'"expiredAt"' in line for line in lines)  # expired records are part of a backup

    backup = tmp_path / "backup.jsonl"
    backup.write_bytes(first.stdout)
    fresh = tmp_path / "fresh"
    imported = run(project, "import", str(backup), "--store-dir", str(fresh))
    assert imported.returncode == 0, imported.stderr
    assert imported.stderr == f"{P}导入完成:新增 7 条,已存在 0 条,跳过 0 行\n"
    again = run_bytes(project, "export", "--store-dir", str(fresh))
    assert sorted(again.stdout.split(b"\n")) == sorted(first.stdout.split(b"\n"))
    original = {
        k: b"".join(ln + b"\n" for ln in v.split(b"\n") if ln and ln != b"{not json at all")
        for k, v in _scope_files(store_dir).items()
    }
    assert _scope_files(fresh) == original  # same files, same lines, same order

    twice = run(project, "import", "-", "--store-dir", str(fresh), stdin=first.stdout)
    assert twice.stderr == f"{P}导入完成:新增 0 条,已存在 7 条,跳过 0 行\n"
    assert _scope_files(fresh) == original


def test_export_of_one_scope_and_import_dedupes_live_content_under_another_id(
    store: SharedStore, project: Path, tmp_path: Path
) -> None:
    ids = seed(store, project)
    only_project = run_bytes(project, "export", "--scope", "project")
    assert only_project.stdout.count(b"\n") == 1 and ids["uv"].encode() in only_project.stdout
    other = json.loads(only_project.stdout)
    other["id"] = "11111111-2222-4333-8444-555555555555"
    same_content = json.dumps(other, ensure_ascii=False, separators=(",", ":")) + "\n"
    result = run(project, "import", "-", stdin=same_content.encode())
    assert result.stderr == f"{P}导入完成:新增 0 条,已存在 1 条,跳过 0 行\n"
    assert run(project, "export", "--scope", "all", "--kind", "x").returncode == 2  # no --kind on export


KNOWLEDGE_GRAPH = (
    '{"type":"entity","name":"John_Smith","entityType":"person","observations":["Speaks fluent Spanish",'
    '"Graduated in 2019"]}\n'
    '{"type":"entity","name":"Anthropic","entityType":"organization","observations":["Builds Claude"]}\n'
    "this line is not json\n"
    '{"type":"relation","from":"John_Smith","to":"Anthropic","relationType":"works_at"}\n'
)


def test_import_of_a_reference_memory_server_graph_makes_one_memory_per_observation_and_relation(
    store_dir: Path, project: Path, tmp_path: Path
) -> None:
    graph = tmp_path / "memory.jsonl"
    graph.write_text(KNOWLEDGE_GRAPH, encoding="utf-8")
    result = run(project, "import", str(graph))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{P}⚠️ 第 3 行不是 JSON,已跳过:this line is not json",
        f"{P}导入完成:新增 4 条,已存在 0 条,跳过 1 行",
    ]
    listed = json.loads(run(project, "list", "--scope", "global", "--json").stdout)
    memories = {r["content"]: (r["kind"], r["tags"]) for r in listed["records"]}
    assert memories == {
        "John_Smith: Speaks fluent Spanish": ("fact", ["person", "mcp-memory-import"]),
        "John_Smith: Graduated in 2019": ("fact", ["person", "mcp-memory-import"]),
        "Anthropic: Builds Claude": ("fact", ["organization", "mcp-memory-import"]),
        "John_Smith works_at Anthropic": ("fact", ["relation", "mcp-memory-import"]),
    }
    found = json.loads(run(project, "search", "Spanish", "--json").stdout)
    assert [r["content"] for r in found["records"]] == ["John_Smith: Speaks fluent Spanish"]
    again = run(project, "import", str(graph))
    assert again.stderr.splitlines()[-1] == f"{P}导入完成:新增 0 条,已存在 4 条,跳过 1 行"
    into_project = run(project, "import", str(graph), "--scope", "project")
    assert into_project.stderr.splitlines()[-1] == f"{P}导入完成:新增 4 条,已存在 0 条,跳过 1 行"
    assert json.loads(run(project, "list", "--scope", "project", "--json").stdout)["total"] == 4


GITHUB_TOKEN_LIKE = "ghp_" + "Zx81Qw0aB7" * 4


def test_import_refuses_what_memory_save_would_refuse_per_record_and_imports_the_rest(
    store_dir: Path, project: Path
) -> None:
    from dsh_memory_mcp.store.records import new_record

    lines = [
        new_record(scope="global", content="导入的正常记录", now=1).raw,
        new_record(scope="global", content="长" * 20_001, now=2).raw,
        new_record(scope="global", content="带坏标签", tags=["x" * 65], now=3).raw,
        new_record(scope="global", content=f"部署用 {GITHUB_TOKEN_LIKE}", now=4).raw,
        '{"type":"entity","name":"Ada","entityType":"person","observations":["Wrote the first program", "'
        + "长" * 20_001
        + '"]}',
    ]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    result = run(project, "import", "-", stdin=data)
    assert result.returncode == 0, result.stderr
    err = result.stderr.splitlines()
    refusals = [line for line in err if "被拒绝" in line]
    assert [line.split("(")[1].split(")")[0] for line in refusals] == [
        "CONTENT_TOO_LONG",
        "TAGS_INVALID",
        "CONTENT_SECRET",
        "CONTENT_TOO_LONG",
    ]
    assert [line.split(" 行")[0] for line in refusals] == [f"{P}⚠️ 第 {n}" for n in (2, 3, 4, 5)]
    assert GITHUB_TOKEN_LIKE not in result.stderr  # the credential is never echoed
    assert err[-1] == f"{P}导入完成:新增 2 条,已存在 0 条,跳过 0 行,拒绝 4 条"
    on_disk = (store_dir / "global.jsonl").read_text("utf-8")
    assert [json.loads(line)["content"] for line in on_disk.splitlines()] == [
        "导入的正常记录",
        "Ada: Wrote the first program",
    ]
    # DSH_MEMORY_ALLOW_SECRETS=1 lets the credential through, the limits still hold
    allowed = run(project, "import", "-", stdin=data, DSH_MEMORY_ALLOW_SECRETS="1")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stderr.splitlines()[-1] == f"{P}导入完成:新增 1 条,已存在 2 条,跳过 0 行,拒绝 3 条"
    assert f"部署用 {GITHUB_TOKEN_LIKE}" in (store_dir / "global.jsonl").read_text("utf-8")
    only_bad = run(project, "import", "-", stdin=(lines[1] + "\n").encode("utf-8"))
    assert only_bad.returncode == 1 and "都被拒绝" in only_bad.stderr


def test_import_reports_bad_lines_and_usage_problems(store_dir: Path, project: Path, tmp_path: Path) -> None:
    mixed = (
        "\ufeff"
        '{"type":"entity","observations":["no name"]}\n'
        "[1,2]\n"
        '{"id":"x1","scope":"","content":"empty scope"}\n'
        '{"hello":"world"}\n'
        "\n"
        '{"entities":[{"name":"Ada","entityType":"person","observations":["Wrote the first program"]}],'
        '"relations":[{"from":"Ada","to":"Babbage","relationType":"worked_with"}]}\n'
    )
    result = run(project, "import", "-", stdin=mixed.encode("utf-8") + b"\xff\xfe\n")
    assert result.returncode == 0
    err = result.stderr.splitlines()
    assert [line.split(",")[0] for line in err[:5]] == [
        f"{P}⚠️ 第 1 行的 entity 缺少 name",
        f"{P}⚠️ 第 2 行不是 JSON 对象",
        f"{P}⚠️ 第 3 行的 scope 不是有效的作用域键",
        f"{P}⚠️ 第 4 行既不是记忆记录(id/scope/content)",
        f"{P}⚠️ 第 7 行不是 UTF-8 文本",
    ]
    assert err[-1] == f"{P}导入完成:新增 2 条,已存在 0 条,跳过 5 行"
    missing = run(project, "import", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 1 and f"无法读取导入文件 {tmp_path / 'nope.jsonl'}" in missing.stderr
    assert run(project, "import").returncode == 2
    assert run(project, "import", "a", "b").returncode == 2
    to_all = run(project, "import", "-", "--scope", "all", stdin=KNOWLEDGE_GRAPH.encode())
    assert to_all.returncode == 1 and "SCOPE_NOT_WRITABLE" in to_all.stderr


# ------------------------------------------------------------------------------------------------
# stats


def test_stats_counts_records_expired_corrupt_lines_sizes_and_sidecars(
    store: SharedStore, store_dir: Path, project: Path
) -> None:
    ids = seed(store, project)
    with open(store.scope_path("global"), "a", encoding="utf-8") as f:
        f.write("garbage\n")
    vec = Path(store.scope_path("global")[: -len(".jsonl")] + ".vec")
    vec.write_text(
        f"#qwen3-embedding-0.6b\t4\n{ids['docker']}\tAAAAAAAAAAAAAAAAAAAAAA==\nstale-id\tAAAA\n", encoding="utf-8"
    )
    before = tree(store_dir)
    result = run(project, "stats", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    by_scope = {row["scope"]: row for row in report["scopes"]}
    assert list(by_scope) == ["global", f"project:{project}", "team notes"]
    g = by_scope["global"]
    assert (g["records"], g["live"], g["expired"], g["corrupt"]) == (4, 3, 1, 1)
    assert g["file"] == "global.jsonl" and g["bytes"] == os.path.getsize(store.scope_path("global"))
    assert g["sidecar"] == {
        "file": "global.vec",
        "bytes": vec.stat().st_size,
        "model": "qwen3-embedding-0.6b",
        "dims": 4,
        "vectors": 2,
        "covered": 1,
    }
    assert by_scope["team notes"]["sidecar"] is None
    assert report["totals"] == {
        "records": 6, "live": 5, "expired": 1, "corrupt": 1,
        "bytes": sum(row["bytes"] for row in report["scopes"]), "vectors": 2, "scopes": 3,
    }  # fmt: skip
    text = run(project, "stats").stdout
    assert f"记忆库:{store_dir}" in text
    assert "  记录 4 条:有效 3,过期/被取代 1,损坏行 1" in text
    assert "qwen3-embedding-0.6b 4 维,2 条,覆盖有效记录 1/3" in text
    assert "合计:3 个作用域,6 条记录(有效 5,过期 1),损坏行 1" in text
    one = json.loads(run(project, "stats", "--scope", "team notes", "--json").stdout)
    assert [row["scope"] for row in one["scopes"]] == ["team notes"]
    assert tree(store_dir) == before  # read-only


# ------------------------------------------------------------------------------------------------
# reembed


def test_reembed_rebuilds_one_vector_per_live_record_with_a_progress_bar(
    store: SharedStore, store_dir: Path, project: Path
) -> None:
    ids = seed(store, project)
    for i in range(40):
        store.save("global", f"note {i} about the release pipeline")
    with FakeLlama() as fake:
        vectors_on = {"DSH_MEMORY_VECTOR": "on", "DSH_MEMORY_EMBED_ENDPOINT": fake.url}
        result = run(project, "reembed", **vectors_on)
        assert result.returncode == 0, result.stderr
        assert result.stdout == ""
        # stderr is a pipe here, not a terminal: no progress at all (tests/test_cli_terminal.py has a pty).
        assert "\r" not in result.stderr and "%" not in result.stderr
        assert result.stderr.splitlines()[-1].startswith(f"{P}重建完成:3 个作用域,写入 45 条向量(model=")
        now = now_ms()
        for scope in store.discover_scopes():
            live = sorted(r.id for r in store.snapshot(scope).records if not r.is_expired(now))
            vec = Path(store.scope_path(scope)[: -len(".jsonl")] + ".vec").read_text(encoding="utf-8").splitlines()
            assert vec[0].endswith("\t64")
            assert sorted(line.split("\t")[0] for line in vec[1:]) == live, scope
        assert ids["old"] not in Path(store.scope_path("global")[: -len(".jsonl")] + ".vec").read_text("utf-8")
        stats = json.loads(run(project, "stats", "--json").stdout)
        assert all(row["sidecar"]["covered"] == row["live"] for row in stats["scopes"])

        # search uses the running backend: a paraphrase with no shared word is found by cosine
        store.save("global", "the deploy pipeline pushes images")
        run(project, "reembed", "global", **vectors_on)
        found = json.loads(run(project, "search", "container release workflow", "--json", **vectors_on).stdout)
        assert "the deploy pipeline pushes images" in [r["content"] for r in found["records"]]

        one = run(project, "reembed", "--scope", "team notes", **vectors_on)
        assert one.returncode == 0 and "1 个作用域" in one.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("hostile", ["fifo", "dev-zero-link"])
def test_a_sidecar_that_is_a_fifo_or_a_link_to_dev_zero_costs_only_the_vector_half_of_a_search(
    store: SharedStore, project: Path, hostile: str
) -> None:
    store.save("global", "the deploy pipeline pushes images")
    vec = Path(store.scope_path("global")[: -len(".jsonl")] + ".vec")
    if hostile == "fifo":
        os.mkfifo(vec, 0o600)
    else:
        vec.symlink_to("/dev/zero")
    with FakeLlama() as fake:
        vectors_on = {"DSH_MEMORY_VECTOR": "on", "DSH_MEMORY_EMBED_ENDPOINT": fake.url}
        # run() has a timeout: a blocking open of the FIFO or an endless read of /dev/zero fails it
        found = run(project, "search", "deploy pipeline", "--json", **vectors_on)
        assert found.returncode == 0, found.stderr
        assert [r["content"] for r in json.loads(found.stdout)["records"]] == ["the deploy pipeline pushes images"]
        assert f"向量文件 {vec} 不可用" in found.stderr  # the WARNING, naming the path
        assert fake.embedding_requests() >= 1  # the vector channel was on and asked
        stats = run(project, "stats", "--json")
        assert stats.returncode == 0, stats.stderr
        row = next(r for r in json.loads(stats.stdout)["scopes"] if r["scope"] == "global")
        assert row["sidecar"]["error"]
    assert vec.is_symlink() if hostile != "fifo" else stat.S_ISFIFO(os.lstat(vec).st_mode)


def test_reembed_without_a_usable_backend_exits_1_with_the_way_to_enable_it(
    store: SharedStore, store_dir: Path, project: Path
) -> None:
    seed(store, project)
    off = run(project, "reembed")
    assert off.returncode == 1
    assert off.stderr.splitlines()[0] == f"{P}❌ 向量检索不可用(DSH_MEMORY_VECTOR=off),无法重建向量"
    assert "去掉 DSH_MEMORY_VECTOR=off" in off.stderr and "DSH_MEMORY_EMBED_ENDPOINT" in off.stderr
    assert not list(store_dir.rglob("*.vec"))


# ------------------------------------------------------------------------------------------------
# the command line around them


def test_human_commands_other_than_search_and_vector_ones_import_neither_the_sdk_nor_numpy_nor_httpx(
    store: SharedStore, project: Path, tmp_path: Path
) -> None:
    seed(store, project)
    broken = tmp_path / "broken"
    for name in ("mcp", "numpy", "httpx"):
        (broken / name).mkdir(parents=True)
        (broken / name / "__init__.py").write_text(f"raise ImportError('{name} must not be imported')\n", "utf-8")
    pythonpath = str(broken) + os.pathsep + subprocess_env()["PYTHONPATH"]
    for argv in (
        ["list"],
        ["get", "0f0f0f0f"],
        ["export"],
        ["stats"],
        ["forget", "--id", "0123456789"],
    ):
        result = run(project, *argv, PYTHONPATH=pythonpath)
        assert result.returncode == 0, (argv, result.stderr)
        assert "must not be imported" not in result.stderr
    # A search ranks on numpy columns; it still needs neither the SDK nor httpx.
    shutil.rmtree(broken / "numpy")
    result = run(project, "search", "docker", PYTHONPATH=pythonpath)
    assert result.returncode == 0, result.stderr
    assert "must not be imported" not in result.stderr


def test_an_unknown_subcommand_exits_2_naming_it_and_a_command_help_exits_0(project: Path) -> None:
    unknown = run(project, "lst")
    assert unknown.returncode == 2
    # Not a known subcommand: said like the server's command line, with the program prefix.
    assert unknown.stderr.startswith("[dsh-memory-mcp] ❌ 参数错误:未知的子命令或多余的参数 lst(可用子命令:")
    assert "你是不是想用子命令 list?" in unknown.stderr
    help_ = run(project, "import", "--help")
    assert (help_.returncode, help_.stderr) == (0, "")
    assert help_.stdout.startswith("dsh-memory-mcp import — 从 JSONL 导入记忆\n")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipe semantics")
def test_output_into_a_closed_pipe_is_quiet_and_an_export_says_it_is_incomplete(
    store: SharedStore, project: Path
) -> None:
    seed(store, project)
    for argv, code, message in ((["export"], 1, f"{P}⚠️ 输出管道已关闭,导出不完整\n"), (["list"], 0, "")):
        read_end, write_end = os.pipe()
        os.close(read_end)  # like `| head` that has already gone
        try:
            result = subprocess.run(
                [PYTHON, "-m", "dsh_memory_mcp", *argv],
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=subprocess.PIPE,
                env=env(project),
                cwd=str(project),
                timeout=TIMEOUT,
            )
        finally:
            os.close(write_end)
        assert (result.returncode, result.stderr.decode()) == (code, message), argv


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in executable is a POSIX shell script")
def test_search_never_spawns_llama_server_while_reembed_spawns_one_and_stops_it(
    store: SharedStore, project: Path, tmp_path: Path
) -> None:
    seed(store, project)
    model = tmp_path / "models" / "All-MiniLM-L6-v2-Q8_0.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF")
    spawns = tmp_path / "spawns.jsonl"
    local = {
        "DSH_MEMORY_VECTOR": "on",
        "DSH_MEMORY_EMBED_EXE": str(make_stand_in(tmp_path / "bin")),
        "DSH_MEMORY_EMBED_MODEL": str(model),
        "DSH_MEMORY_EMBED_PORT": str(free_port()),
        "FAKE_LLAMA_ARGV_FILE": str(spawns),
    }
    searched = run(project, "search", "docker", **local)
    assert searched.returncode == 0 and searched.stdout.startswith("找到 1 条记忆")
    assert read_spawns(spawns) == []  # nothing answered on the port: lexical, no spawn
    rebuilt = run(project, "reembed", **local)
    assert rebuilt.returncode == 0, rebuilt.stderr
    [spawn] = read_spawns(spawns)
    assert wait_gone(spawn["pid"], 10)  # stopped when the command closed
    vec = Path(store.scope_path("global")[: -len(".jsonl")] + ".vec").read_text(encoding="utf-8")
    assert vec.startswith("#all-minilm-l6-v2\t64\n")
