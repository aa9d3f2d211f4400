"""The tools layer as plain functions: validation codes, scope decisions, rendering — no transport."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_memory_mcp.config import resolve_settings
from dsh_memory_mcp.service.schemas import TOOL_NAMES, TOOL_SPECS
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.store.shared import SharedStore
from tests.helpers.services import code, make_service


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "ws" / "app"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def svc(store_dir: Path, project: Path):
    service = make_service(store_dir, project)
    yield service
    service.store.close()


def test_every_tool_spec_has_schemas_and_a_description_naming_its_errors():
    assert TOOL_NAMES == ("memory_save", "memory_search", "memory_list", "memory_get", "memory_forget")
    for spec in TOOL_SPECS:
        assert spec.input_schema["type"] == "object"
        assert spec.output_schema["required"][0] == "ok"
        assert "Errors:" in spec.description
        for prop in spec.input_schema["properties"].values():
            assert prop.get("description") or prop.get("enum") or "default" in prop


def test_save_defaults_to_global_and_scope_all_env_switches_it_to_the_project(store_dir, project):
    svc = make_service(store_dir, project)
    assert svc.call("memory_save", {"content": "a"}).structured["scope"] == "global"
    svc2 = make_service(store_dir, project, DSH_MEMORY_SCOPE_ALL="yes")
    assert svc2.call("memory_save", {"content": "b"}).structured["scope"] == f"project:{project}"


def test_bare_session_means_the_current_project_and_session_ids_are_kept(svc, project):
    assert svc.call("memory_save", {"content": "a", "scope": "session"}).structured["scope"] == f"project:{project}"
    assert svc.call("memory_save", {"content": "b", "scope": "session:42"}).structured["scope"] == "session:42"


def test_a_relative_path_resolves_against_the_project_dir(svc, project):
    result = svc.call("memory_save", {"content": "a", "path": "../other/./x/"})
    assert result.structured["scope"] == f"project:{project.parent / 'other' / 'x'}"


def test_custom_scope_names_are_folded_and_lower_cased(svc):
    result = svc.call("memory_save", {"content": "a", "scope": "  My   Team "})
    assert result.structured["scope"] == "my team"
    found = svc.call("memory_search", {"query": "a", "scope": "MY TEAM"})
    assert not found.is_error and found.structured["scopes"] == ["my team"]


@pytest.mark.parametrize(
    "name",
    ["a/b", "a\\b", "a:b", "..x", "...", "  ", "global", "ALL", "x" * 65, "tab\x01"],
    ids=[
        "slash",
        "backslash",
        "colon",
        "dotdot",
        "only-dots",
        "blank-is-default",
        "reserved",
        "reserved-all",
        "long",
        "control",
    ],
)
def test_invalid_custom_scope_names_are_refused_not_replaced(svc, name):
    result = svc.call("memory_save", {"content": "a", "scope": name})
    if name.strip() == "":
        assert result.structured["scope"] == "global"  # blank scope = omitted
    elif name.strip().lower() in ("global",):
        assert result.structured["scope"] == "global"
    elif name.strip().lower() == "all":
        assert code(result) == "SCOPE_NOT_WRITABLE"
    else:
        assert code(result) == "SCOPE_INVALID", result


def test_path_with_a_custom_name_registers_an_alias_that_later_resolves(svc, store_dir, tmp_path):
    target = tmp_path / "repo"
    saved = svc.call("memory_save", {"content": "alias me", "path": str(target), "scope": "Repo"})
    assert saved.structured["scope"] == f"project:{target}"
    aliases = json.loads((store_dir / "scopes.json").read_text(encoding="utf-8"))
    assert aliases == {"repo": f"project:{target}"}
    found = svc.call("memory_search", {"query": "alias", "scope": "repo"})
    assert found.structured["scopes"] == [f"project:{target}"] and found.structured["count"] == 1
    taken = svc.call("memory_save", {"content": "x", "path": str(tmp_path / "elsewhere"), "scope": "repo"})
    assert code(taken) == "SCOPE_NAME_TAKEN"


def test_path_conflicts_with_global_session_and_all(svc):
    for scope in ("global", "session", "session:1", "all", "*"):
        assert code(svc.call("memory_save", {"content": "a", "path": "/x", "scope": scope})) == "PATH_SCOPE_CONFLICT"


def test_search_and_list_default_to_project_plus_global_and_all_reads_every_scope(svc, project):
    svc.call("memory_save", {"content": "shared pnpm preference"})
    svc.call("memory_save", {"content": "project pnpm workspace", "scope": "project"})
    svc.call("memory_save", {"content": "team pnpm registry", "scope": "team"})
    default = svc.call("memory_search", {"query": "pnpm"}).structured
    assert default["scopes"] == [f"project:{project}", "global"] and default["count"] == 2
    every = svc.call("memory_search", {"query": "pnpm", "scope": "all"}).structured
    assert every["count"] == 3 and set(every["scopes"]) == {"global", f"project:{project}", "team"}
    listed = svc.call("memory_list", {"scope": "*"}).structured
    assert listed["count"] == 3


def test_project_results_rank_before_global_on_equal_scores(svc, project):
    svc.call("memory_save", {"content": "use ruff for linting"})
    svc.call("memory_save", {"content": "use ruff for linting", "scope": "project"})
    records = svc.call("memory_search", {"query": "ruff linting"}).structured["records"]
    assert [r["scope"] for r in records] == [f"project:{project}", "global"]


def test_list_is_newest_first_filters_by_kind_and_honours_limit(store_dir, project):
    # An injected clock a second apart per reading: every save has its own updatedAt, so only a
    # newest-first sort gives this order (ids are random uuid4s, so an id order would not).
    ticks = iter(range(1_700_000_000_000, 1_800_000_000_000, 1000))
    settings = resolve_settings(store_dir=str(store_dir), project_dir=str(project), env={}, cwd=str(project))
    store = SharedStore(settings.store_dir, clock=lambda: next(ticks))
    store.prepare()
    svc = MemoryService(settings=settings, store=store)
    try:
        ids = [
            svc.call("memory_save", {"content": f"item {i}", "kind": "fact" if i % 2 else "rule"}).structured["id"]
            for i in range(5)
        ]
        listed = svc.call("memory_list", {"limit": 2}).structured
        assert listed["count"] == 2 and listed["total"] == 5
        assert [r["id"] for r in listed["records"]] == [ids[4], ids[3]]
        every = svc.call("memory_list", {}).structured
        assert [r["id"] for r in every["records"]] == ids[::-1]
        rules = svc.call("memory_list", {"kind": "RULE"}).structured
        assert [r["id"] for r in rules["records"]] == [ids[4], ids[2], ids[0]]
        assert {r["kind"] for r in rules["records"]} == {"rule"} and rules["count"] == 3
    finally:
        store.close()


def test_numbers_as_strings_and_lists_as_json_text_are_accepted(svc):
    saved = svc.call("memory_save", {"content": "a", "tags": '["x","y"]', "importance": "0.7"})
    assert not saved.is_error
    got = svc.call("memory_get", {"ids": json.dumps([saved.structured["id"]])}).structured
    assert got["records"][0]["tags"] == ["x", "y"] and got["records"][0]["importance"] == 0.7
    assert svc.call("memory_search", {"query": "a", "topK": "3"}).is_error is False


def test_get_deduplicates_caps_at_fifty_and_reports_short_prefixes_missing(svc):
    rid = svc.call("memory_save", {"content": "a"}).structured["id"]
    result = svc.call("memory_get", {"ids": [rid, rid[:8], rid[:4]] + [f"missing-{i:04d}" for i in range(60)]})
    assert result.structured["count"] == 1
    assert rid[:4] in result.structured["missing"]
    assert len(result.structured["missing"]) == 50 - 2


def test_supersedes_hides_the_old_record_from_search_but_keeps_it_on_disk(svc, store_dir):
    old = svc.call("memory_save", {"content": "deploy with fabric"}).structured["id"]
    new = svc.call("memory_save", {"content": "deploy with ansible", "supersedes": old[:8]})
    assert new.structured["superseded"] == old
    found = svc.call("memory_search", {"query": "deploy"}).structured
    assert [r["content"] for r in found["records"]] == ["deploy with ansible"]
    assert old in (store_dir / "global.jsonl").read_text(encoding="utf-8")
    got = svc.call("memory_get", {"ids": [old]})
    assert got.structured["records"][0]["expiredAt"] > 0 and "已被取代" in got.text


def test_forget_by_query_defaults_to_the_current_project_and_never_touches_global(svc, project):
    svc.call("memory_save", {"content": "temp note global"})
    svc.call("memory_save", {"content": "temp note project", "scope": "project"})
    result = svc.call("memory_forget", {"query": "TEMP NOTE"}).structured
    assert result["deleted"] == 1
    remaining = svc.call("memory_list", {}).structured["records"]
    assert [r["content"] for r in remaining] == ["temp note global"]
    assert svc.call("memory_forget", {"query": "temp", "scope": "global"}).structured["deleted"] == 1


def test_forget_by_an_ambiguous_prefix_deletes_nothing(svc, store_dir):
    lines = [
        {"id": "abcdefgh-1111-4111-8111-111111111111", "scope": "global", "kind": "note", "content": "one"},
        {"id": "abcdefgh-2222-4222-8222-222222222222", "scope": "global", "kind": "note", "content": "two"},
    ]
    (store_dir / "global.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    result = svc.call("memory_forget", {"id": "abcdefgh"})
    assert code(result) == "TARGET_AMBIGUOUS"
    assert "abcdefgh-1111" in result.structured["message"]
    assert len((store_dir / "global.jsonl").read_text(encoding="utf-8").splitlines()) == 2


def test_unknown_tools_and_non_object_arguments_are_coded_errors(svc):
    assert code(svc.call("nope", {})) == "UNKNOWN_TOOL"
    assert code(svc.call("memory_list", ["not", "a", "dict"])) == "TOOL_ERROR"  # type: ignore[arg-type]


def test_an_unexpected_exception_is_internal_error_without_a_stack(svc, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(svc.store, "snapshot", boom)
    result = svc.call("memory_list", {})
    assert code(result) == "INTERNAL_ERROR"
    assert "secret internals" not in result.text and "Traceback" not in result.text


def test_search_text_shows_scope_kind_tags_importance_and_the_hint(svc, project):
    svc.call(
        "memory_save",
        {
            "content": "本机 DSH 的 desktop profile 由 Electron 应用独占管理",
            "kind": "procedure",
            "tags": ["DSH", "desktop profile"],
            "importance": 0.9,
        },
    )
    text = svc.call("memory_search", {"query": "desktop profile"}).text
    head, first, hint = text.split("\n\n")
    assert head == f"找到 1 条记忆(检索范围:{project} [来自 --project], global)"
    line1, line2 = first.split("\n")
    assert line1.startswith("[") and line1.endswith(
        "] (global/procedure) 本机 DSH 的 desktop profile 由 Electron 应用独占管理"
    )
    assert line2.startswith("  id=") and " tags=DSH,desktop profile importance=0.90 updated=" in line2
    assert hint == "提示:需要完整内容时用 memory_get 传入上面的 8 位 id 前缀。"


def test_each_call_resolves_project_from_its_own_context_not_the_process(svc, tmp_path: Path):
    from dsh_memory_mcp.service.context import CallContext

    other = tmp_path / "elsewhere" / "lib"
    other.mkdir(parents=True)
    ctx = CallContext(project_dir=str(other), project_source="roots")
    saved = svc.call("memory_save", {"content": "库 lib 用 tabs 缩进", "scope": "project"}, ctx)
    assert not saved.is_error, saved.text
    assert saved.structured["scope"] == f"project:{other.as_posix()}"
    # The process default (its --project) sees nothing of it; the other context finds it.
    assert svc.call("memory_list", {"scope": "project"}).structured["count"] == 0
    listed = svc.call("memory_list", {"scope": "project"}, ctx)
    assert [r["content"] for r in listed.structured["records"]] == ["库 lib 用 tabs 缩进"]
    # A relative path argument resolves against the call's project, too.
    rel = svc.call("memory_list", {"path": "."}, ctx)
    assert rel.structured["scopes"] == [f"project:{other.as_posix()}"]


def test_settings_say_where_the_project_came_from(tmp_path: Path):
    flag = resolve_settings(store_dir=str(tmp_path), project_dir=str(tmp_path), env={}, cwd=str(tmp_path))
    env = resolve_settings(store_dir=str(tmp_path), env={"DSH_MEMORY_PROJECT": str(tmp_path)}, cwd=str(tmp_path))
    cwd = resolve_settings(store_dir=str(tmp_path), env={}, cwd=str(tmp_path))
    assert (flag.project_source, env.project_source, cwd.project_source) == ("flag", "env", "cwd")


@pytest.mark.parametrize("seed", range(20))
def test_list_shows_the_same_newest_records_as_sorting_them_all(seed: int):
    import random

    from dsh_memory_mcp.service.tools import newest
    from dsh_memory_mcp.store.records import new_record

    rng = random.Random(seed)
    # Few distinct times (a bulk import stamps many alike), ids in random order.
    times = [1_700_000_000_000 + rng.randrange(6) for _ in range(rng.randrange(0, 300))]
    recs = [
        new_record(scope="global", content=f"r{i}", now=t, record_id=f"{rng.randrange(10**6):06d}-{i}")
        for i, t in enumerate(times)
    ]
    for limit in (1, 3, 20, 500):
        want = sorted(recs, key=lambda r: (-r.updated_at, r.id))[:limit]
        assert [r.id for r in newest(list(recs), limit)] == [r.id for r in want]
