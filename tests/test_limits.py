"""Size limits with codes, credentials refused, and huge foreign records served at bounded cost."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers.mcp_session import memory_session
from tests.helpers.services import code, make_service


@pytest.fixture
def svc(store_dir: Path, tmp_path: Path):
    service = make_service(store_dir, tmp_path)
    yield service
    service.store.close()


def lines(store_dir: Path) -> list[str]:
    path = store_dir / "global.jsonl"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


# -- content -----------------------------------------------------------------------------------


def test_content_of_20000_characters_is_saved_and_one_more_is_content_too_long(svc, store_dir):
    assert not svc.call("memory_save", {"content": "长" * 20_000}).is_error
    refused = svc.call("memory_save", {"content": "短" * 20_001})
    assert code(refused) == "CONTENT_TOO_LONG"
    assert "20001" in refused.structured["message"] and "DSH_MEMORY_MAX_CONTENT" in refused.structured["message"]
    assert len(lines(store_dir)) == 1


def test_a_20_mb_content_is_refused_quickly_and_nothing_is_written(svc, store_dir):
    started = time.perf_counter()
    refused = svc.call("memory_save", {"content": "x" * 20_000_000})
    assert code(refused) == "CONTENT_TOO_LONG"
    assert time.perf_counter() - started < 2.0
    assert lines(store_dir) == []


def test_dsh_memory_max_content_sets_the_limit(store_dir, tmp_path):
    service = make_service(store_dir, tmp_path, DSH_MEMORY_MAX_CONTENT="100")
    try:
        assert not service.call("memory_save", {"content": "a" * 100}).is_error
        assert code(service.call("memory_save", {"content": "b" * 101})) == "CONTENT_TOO_LONG"
    finally:
        service.store.close()


# -- tags --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tags",
    [
        {"a": 1},
        [["nested"]],
        [True],
        [None],
        42,
        [f"t{i}" for i in range(33)],
        [f"t{i}" for i in range(10_000)],
        ["x" * 65],
    ],
    ids=["object", "nested list", "bool", "null", "number", "33 tags", "10000 tags", "a 65-char tag"],
)
def test_tags_that_are_not_a_short_list_of_short_strings_are_tags_invalid_and_nothing_is_written(svc, store_dir, tags):
    result = svc.call("memory_save", {"content": "带标签的记忆", "tags": tags})
    assert code(result) == "TAGS_INVALID", result.structured
    assert lines(store_dir) == []


def test_32_distinct_tags_of_64_characters_are_kept_whole(svc, store_dir):
    tags = [f"{i:02d}" + "标" * 62 for i in range(32)]
    result = svc.call("memory_save", {"content": "三十二个标签", "tags": tags + tags[:5]})  # repeats collapse
    assert not result.is_error, result.structured
    assert json.loads(lines(store_dir)[0])["tags"] == tags


# -- query -------------------------------------------------------------------------------------


def test_an_over_long_query_is_cut_to_1000_characters_and_the_answer_says_so(svc):
    svc.call("memory_save", {"content": "部署脚本放在 ops/deploy.sh"})
    result = svc.call("memory_search", {"query": "部署脚本 " + "无关词 " * 5_000})
    assert not result.is_error
    assert "query 过长,只用了前 1000 个字符" in result.text
    assert result.structured["count"] == 1


# -- secrets -----------------------------------------------------------------------------------

GITHUB_TOKEN = "ghp_" + "Zx81Qw0aB7Lm4Np2Rs6Tu9Vy3Wc5Xd1Ef8Gh"


def test_a_credential_is_refused_with_content_secret_in_chinese_without_echoing_it(svc, store_dir):
    result = svc.call("memory_save", {"content": f"CI 用的 GitHub token 是 {GITHUB_TOKEN}"})
    assert code(result) == "CONTENT_SECRET"
    message = result.structured["message"]
    assert "密钥放在哪里" in message and "DSH_MEMORY_ALLOW_SECRETS" in message
    assert GITHUB_TOKEN not in message and GITHUB_TOKEN not in result.text
    assert lines(store_dir) == []


def test_a_credential_in_a_tag_is_refused_too(svc, store_dir):
    assert code(svc.call("memory_save", {"content": "CI 的令牌", "tags": [GITHUB_TOKEN]})) == "CONTENT_SECRET"
    assert lines(store_dir) == []


def test_where_a_secret_lives_is_saved(svc, store_dir):
    result = svc.call("memory_save", {"content": "GitHub token 在 1Password 的 CI 条目里,CI 读环境变量 GITHUB_TOKEN"})
    assert not result.is_error
    assert len(lines(store_dir)) == 1


def test_dsh_memory_allow_secrets_turns_the_check_off(store_dir, tmp_path):
    service = make_service(store_dir, tmp_path, DSH_MEMORY_ALLOW_SECRETS="1")
    try:
        assert not service.call("memory_save", {"content": f"token {GITHUB_TOKEN}"}).is_error
    finally:
        service.store.close()
    assert GITHUB_TOKEN in lines(store_dir)[0]


# -- a huge record written by another program ---------------------------------------------------


def test_a_1_mb_record_from_another_program_is_found_by_its_start_returned_cut_and_kept_whole(tmp_path, store_dir):
    store_dir.mkdir()
    head = "巨型记录开头:发布流程的全部细节 "
    tail_word = "zzuniquetailword"
    content = head + "填充内容 " * 200_000 + tail_word
    record = {"id": "bigbigbi-1111-2222-3333-444444444444", "scope": "global", "kind": "note", "content": content}
    record.update(tags=[], createdAt=1, updatedAt=1)
    (store_dir / "global.jsonl").write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    with memory_session(store_dir, project=tmp_path) as s:
        found = s.call("memory_search", {"query": "发布流程"})
        sc = found.structured_content
        assert sc["count"] == 1, found.content[0].text
        hit = sc["records"][0]
        assert hit["truncated"] is True and hit["contentChars"] == len(content)
        assert len(hit["content"]) == 2_000 and hit["content"] == content[:2_000]
        assert len(found.content[0].text) < 2_000 and "memory_get" in found.content[0].text
        # Only the first 20,000 characters are indexed: a word at the very end is not found.
        assert s.call("memory_search", {"query": tail_word}).structured_content["count"] == 0
        listed = s.call("memory_list", {}).structured_content["records"][0]
        assert listed["truncated"] is True and len(listed["content"]) == 2_000
        # memory_get pages it: 20,000 characters per call, nextOffset until the end.
        parts, offset = [], 0
        while True:
            got = s.call("memory_get", {"ids": ["bigbigbi"], "offset": offset}).structured_content["records"][0]
            assert got["contentChars"] == len(content) and got["contentOffset"] == offset
            assert len(got["content"]) <= 20_000
            parts.append(got["content"])
            if "nextOffset" not in got:
                assert "truncated" not in got
                break
            assert got["truncated"] is True and got["nextOffset"] == offset + 20_000
            offset = got["nextOffset"]
        assert "".join(parts) == content and len(parts) == -(-len(content) // 20_000)
    on_disk = json.loads((store_dir / "global.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert on_disk["content"] == content


def test_memory_get_of_a_20_mb_record_from_another_program_answers_one_bounded_part_and_says_how_to_page(
    tmp_path, store_dir
):
    store_dir.mkdir()
    content = ("二十兆的外来记录 line of text 1234 " * 800_000)[:20_000_000]
    record = {"id": "hugehuge-1111-2222-3333-444444444444", "scope": "global", "kind": "note", "content": content}
    record.update(tags=[], createdAt=1, updatedAt=1, source={"origin": "other-tool"})
    (store_dir / "global.jsonl").write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    with memory_session(store_dir, project=tmp_path) as s:
        answer = s.call("memory_get", {"ids": ["hugehuge"]})
        got = answer.structured_content["records"][0]
        assert got["content"] == content[:20_000] and got["truncated"] is True
        assert got["contentChars"] == 20_000_000 and got["nextOffset"] == 20_000 and got["source"]["origin"] == "other-tool"
        text = answer.content[0].text
        assert len(text) < 25_000 and "offset: 20000" in text and "20000000" in text and "other-tool" in text
        size = len(json.dumps(answer.model_dump(mode="json"), ensure_ascii=False).encode("utf-8"))
        assert size < 200_000  # was 42 MB: the content twice, escaped
        last = s.call("memory_get", {"ids": ["hugehuge"], "offset": 19_990_000}).structured_content["records"][0]
        assert last["content"] == content[19_990_000:] and "nextOffset" not in last and "truncated" not in last
        beyond = s.call("memory_get", {"ids": ["hugehuge"], "offset": 30_000_000})
        assert beyond.structured_content["records"][0]["content"] == "" and "超出" in beyond.content[0].text
        for bad in (-1, "x", 1.5, True):
            refused = s.call("memory_get", {"ids": ["hugehuge"], "offset": bad})
            assert refused.is_error and refused.structured_content["code"] == "TOOL_ERROR"


def test_a_record_within_the_content_limit_comes_whole_without_paging_fields(svc):
    rid = svc.call("memory_save", {"content": "完整返回" * 5_000, "scope": "global"}).structured["id"]
    got = svc.call("memory_get", {"ids": [rid]}).structured["records"][0]
    assert len(got["content"]) == 20_000
    assert not {"truncated", "contentChars", "contentOffset", "nextOffset"} & set(got)
