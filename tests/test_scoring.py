"""Unit tests of search scoring: tokenizer, per-scope IDF, thresholds, boosts and hybrid ranking.

Snapshots are a tiny stand-in dataclass (the store's `ScopeSnapshot` has the same three fields
scoring reads) holding real `records.Record` objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.search.scoring import (
    Hit,
    LexicalIndex,
    idf,
    importance_factor,
    index_for,
    is_weak_token,
    query_has_tokens,
    rank,
    tokenize,
)
from dsh_memory_mcp.store import records

NOW = 1_790_000_000_000
PROJECT = "project:/home/dev/app"


@dataclass(frozen=True)
class Snap:
    scope: str
    records: tuple[records.Record, ...]
    cache: dict[str, Any] = field(default_factory=dict)


def rec(content: str, *, scope: str = "global", rid: str | None = None, **extra: Any) -> records.Record:
    record = records.new_record(scope=scope, content=content, now=NOW - 1000, record_id=rid)
    return record.with_changes(**extra) if extra else record


def snap(scope: str, *items: records.Record | str) -> Snap:
    return Snap(scope, tuple(i if isinstance(i, records.Record) else rec(i, scope=scope) for i in items))


def filler(n: int, scope: str = "global") -> list[records.Record]:
    """Records that share no token with the queries of these tests; they only make N larger."""
    return [rec(f"unrelated{i}", scope=scope, rid=f"zz-filler-{i:03d}") for i in range(n)]


def ids(hits: Sequence[Hit]) -> list[str]:
    return [h.record.id for h in hits]


# --- tokenizer -------------------------------------------------------------------------------


def test_full_width_letters_and_digits_are_folded_by_nfkc() -> None:
    assert tokenize("ＴｙｐｅＳｃｒｉｐｔ ５") == ["typescript", "5"]


def test_words_are_case_folded_so_any_spelling_matches() -> None:
    assert tokenize("PNPM Pnpm pnpm") == ["pnpm", "pnpm", "pnpm"]
    assert tokenize("STRASSE") == tokenize("Straße")


def test_a_chinese_run_gives_its_adjacent_bigrams_and_its_single_characters() -> None:
    assert tokenize("严格模式") == ["严格", "格模", "模式", "严", "格", "模", "式"]


def test_mixed_chinese_and_latin_text_gives_words_bigrams_and_characters() -> None:
    assert tokenize("TypeScript 严格模式") == ["typescript", "严格", "格模", "模式", "严", "格", "模", "式"]


def test_digits_and_letters_next_to_chinese_are_a_separate_word() -> None:
    assert tokenize("V3接口") == ["v3", "接口", "接", "口"]


def test_punctuation_between_chinese_characters_ends_a_run() -> None:
    assert tokenize("日志,协议") == ["日志", "日", "志", "协议", "协", "议"]


def test_japanese_kana_is_tokenized_like_chinese() -> None:
    assert tokenize("ドキュメント") == ["ドキ", "キュ", "ュメ", "メン", "ント", "ド", "キ", "ュ", "メ", "ン", "ト"]
    # The katakana middle dot is punctuation, not part of a run.
    assert "す・" not in tokenize("です・ます")
    assert "です" in tokenize("です・ます") and "ます" in tokenize("です・ます")


def test_half_width_katakana_matches_full_width_katakana() -> None:
    assert tokenize("ﾄﾞｷｭﾒﾝﾄ") == tokenize("ドキュメント")


def test_hangul_and_han_extension_characters_are_cjk() -> None:
    assert tokenize("한국어") == ["한국", "국어", "한", "국", "어"]
    assert tokenize("𠀀𠀁") == ["𠀀𠀁", "𠀀", "𠀁"]


def test_emoji_and_punctuation_give_no_tokens() -> None:
    assert tokenize("🚀 !!! ... —") == []
    assert tokenize("deploy 🚀 now") == ["deploy", "now"]


def test_cyrillic_greek_and_accented_words_are_words() -> None:
    assert tokenize("Привет café Λόγος") == ["привет", "café", "λόγοσ"]


def test_a_snake_case_identifier_gives_the_whole_name_and_its_parts() -> None:
    assert tokenize("snake_case_name") == ["snake_case_name", "snake", "case", "name"]
    assert tokenize("DSH_MEMORY_STORE_DIR")[0] == "dsh_memory_store_dir"


def test_paths_versions_and_hyphenated_words_keep_the_compound_and_the_parts() -> None:
    assert tokenize("config/app.toml") == ["config/app.toml", "config", "app", "toml"]
    assert tokenize("v2.4.1") == ["v2.4.1", "v2", "4", "1"]
    assert tokenize("long-term") == ["long-term", "long", "term"]


def test_a_trailing_full_stop_is_not_part_of_the_word() -> None:
    assert tokenize("Use pnpm.") == ["use", "pnpm"]


def test_lower_camel_identifiers_are_split_and_product_names_are_not() -> None:
    assert tokenize("lastLoginAt") == ["lastloginat", "last", "login", "at"]
    assert tokenize("parseHTTPResponse") == ["parsehttpresponse", "pars", "http", "respons"]
    # "java" must not be a perfect hit on every JavaScript memory.
    assert tokenize("JavaScript") == ["javascript"]
    assert tokenize("GitHub PostgreSQL") == ["github", "postgresql"]


def test_single_cjk_characters_are_weak_and_words_and_bigrams_are_strong() -> None:
    assert is_weak_token("锁") and is_weak_token("ド")
    assert not is_weak_token("部署")
    assert not is_weak_token("a") and not is_weak_token("7")


def test_a_query_of_only_punctuation_has_no_tokens() -> None:
    assert not query_has_tokens("!!! ??? ...")
    assert not query_has_tokens("🚀🚀")
    assert not query_has_tokens("")
    assert query_has_tokens("锁")
    assert query_has_tokens("  x ")


# --- IDF and the lexical score --------------------------------------------------------------


def test_idf_is_positive_and_falls_as_document_frequency_rises() -> None:
    values = [idf(100, df) for df in range(101)]
    assert all(v > 0 for v in values)
    assert values == sorted(values, reverse=True)
    assert values[100] < 0.05  # a token in every record says almost nothing
    assert values[0] > 10 * values[100]


def _bm25(tf: int, dl: float, avgdl: float) -> float:
    """BM25's saturated term frequency, k1 = 1.2, b = 0.3, records shorter than average taken as average."""
    return tf * 2.2 / (tf + 1.2 * (0.7 + 0.3 * max(dl, avgdl) / avgdl))


def test_the_lexical_strength_is_bm25_over_the_query_idf_and_the_plain_share_for_a_single_mention() -> None:
    records_ = [rec("alpha beta"), rec("alpha"), rec("gamma")]
    index = LexicalIndex.build(records_)
    w_alpha, w_beta, w_delta = idf(3, 2), idf(3, 1), idf(3, 0)
    total = w_alpha + w_beta + w_delta
    avgdl = 4 / 3
    scores = index.scores(scoring.query_tokens("alpha beta delta"), threshold=0.0)
    assert scores[0] == pytest.approx((w_alpha + w_beta) * _bm25(1, 2, avgdl) / total)
    assert scores[1] == pytest.approx(w_alpha * _bm25(1, 1, avgdl) / total)
    assert 2 not in scores
    # A single mention in a record no longer than average counts exactly its IDF share.
    assert scores[1] == pytest.approx(w_alpha / total)
    even = LexicalIndex.build([rec("alpha"), rec("beta"), rec("gamma")])
    assert even.scores(scoring.query_tokens("alpha beta"), threshold=0.0)[0] == pytest.approx(
        idf(3, 1) / (2 * idf(3, 1))
    )


def test_a_repeated_word_counts_more_and_a_long_record_less_but_the_hit_bar_is_the_plain_share() -> None:
    # "adoption" once in a long rambling turn vs twice in a short one about it: BM25 orders them
    # (the share of the query both contain is the same, so they used to tie and fall to the id).
    rambling = rec(
        "we talked about the weather the garden the kids school and at the very end the adoption papers", rid="a"
    )
    focused = rec("adoption news: the adoption agency called back", rid="z")
    snapshot = snap("global", rambling, focused, *filler(10))
    hits = rank([snapshot], "adoption agency papers", top_k=5, now=NOW)
    assert ids(hits)[0] == "z"


def test_a_repeated_query_word_counts_once() -> None:
    index = LexicalIndex.build([rec("alpha"), rec("beta")])
    once = index.scores(scoring.query_tokens("alpha beta"), threshold=0.0)
    twice = index.scores(scoring.query_tokens("alpha alpha alpha beta"), threshold=0.0)
    assert once == twice


def test_tags_are_searchable_like_content() -> None:
    tagged = rec("部署说明").with_changes(tags=["kubernetes"])
    hits = rank([snap("global", tagged, *filler(5))], "kubernetes", top_k=5, now=NOW)
    assert ids(hits) == [tagged.id]


def test_idf_is_computed_per_scope() -> None:
    # "deploy" is rare in A and common in B; "docker" the other way round.
    target_a = rec("deploy notes", scope=PROJECT, rid="target-a")
    target_b = rec("deploy notes", scope="global", rid="target-b")
    scope_a = snap(PROJECT, target_a, *[f"docker item{i}" for i in range(8)])
    scope_b = snap("global", target_b, *[f"deploy docker item{i}" for i in range(8)])
    assert index_for(scope_a).df("deploy") == 1 and index_for(scope_b).df("deploy") == 9
    # "kubernetes" is in neither scope, so it weighs the same in both.
    query = "deploy docker kubernetes"
    hits = {h.record.id: h.lexical for h in rank([scope_a, scope_b], query, top_k=20, now=NOW)}
    assert hits["target-a"] == pytest.approx(idf(9, 1) / (idf(9, 1) + idf(9, 8) + idf(9, 0)))
    assert hits["target-a"] > 0.3
    # In B "deploy" is in every record, so it carries almost none of the query's weight.
    assert idf(9, 9) / (idf(9, 9) + idf(9, 8) + idf(9, 0)) < 0.12
    assert "target-b" not in hits


def test_a_question_whose_only_link_to_its_memory_is_a_word_form_finds_it() -> None:
    # "supports"/"supporting", "adopting"/"adoption": no word in common until both are stemmed.
    answer = rec("[2 May 2023] Maya: I've been supporting the adoption agency with their paperwork", rid="answer")
    others = [rec(f"[2 May 2023] Jordan: lunch plans and the weather, part {i}", rid=f"z{i}") for i in range(10)]
    hits = rank([snap("global", answer, *others)], "Who supports adopting?", top_k=5, now=NOW)
    assert ids(hits) == ["answer"]


_CHAT = [
    "Caroline: morning! did you sleep well?",
    "Ben: I went to the market and got some apples",
    "Melanie: apples sound great, I need some too",
    "Caroline: what did you do at the weekend?",
    "Melanie: mostly gardening, the roses are out",
    "Ben: I love roses, my mum grew them",
    "Caroline: did you see the match last night?",
    "Melanie: no, I was asleep by nine",
    "Ben: ha, same as always",
    "Caroline: my sister is visiting next week",
    "Melanie: how long is she staying?",
    "Caroline: just the weekend, then she flies to Rome",
    "Ben: I should clean the flat before my parents come",
    "Melanie: good luck with that",
    "Caroline: thanks, I will need it",
    "Ben: what are you reading these days?",
    "Melanie: a mystery novel set in Oslo",
    "Caroline: sounds good, lend it to me after",
    "Ben: I started running again, slowly",
    "Melanie: proud of you",
    "Caroline: the weather is awful today",
    "Ben: did you hear about the new bakery?",
    "Melanie: yes, their bread is amazing",
]


def test_a_speaker_name_flood_does_not_fill_the_results_when_the_question_has_a_rarer_word() -> None:
    # The name is on a third of the turns of the chat. The question names her and asks about
    # pottery, which one turn mentions: that turn is the answer; turns that share nothing but her
    # name are not relevant to it, however many there are (their share of the question, 0.29,
    # passed the bar, and they filled the other four places).
    answer = rec("Melanie: the pottery class on Friday was so much fun", rid="answer")
    chat = [rec(text, rid=f"chat-{i:02d}") for i, text in enumerate(_CHAT)]
    snapshot = snap("global", *chat[:10], answer, *chat[10:])
    assert index_for(snapshot).df(tokenize("Caroline")[0]) > len(snapshot.records) / 4
    assert ids(rank([snapshot], "Caroline pottery", top_k=5, now=NOW)) == ["answer"]
    # Asked about her alone, her turns are what there is.
    assert len(rank([snapshot], "Caroline", top_k=5, now=NOW)) == 5


# --- thresholds ------------------------------------------------------------------------------


def test_a_strong_hit_needs_a_share_of_0_12_in_global_but_only_0_10_elsewhere() -> None:
    # One query word in the record, six the scope has never seen: share ≈ 0.105.
    query = "alpha nothing1 nothing2 nothing3 nothing4 nothing5 nothing6"
    share = idf(20, 1) / (idf(20, 1) + 6 * idf(20, 0))
    assert 0.10 < share < 0.12
    for scope, expected in ((PROJECT, True), ("session:s1", True), ("team notes", True), ("global", False)):
        target = rec("alpha", scope=scope, rid="target")
        hits = rank([snap(scope, target, *filler(19, scope))], query, top_k=5, now=NOW)
        assert (ids(hits) == ["target"]) is expected, scope
        if expected:
            assert hits[0].lexical == pytest.approx(share)


def test_a_match_on_single_characters_only_needs_a_quarter_share() -> None:
    # Query "部署 alpha": tokens 部署, 部, 署, alpha. "部门" shares only 部; "alpha" shares alpha.
    weak_only = rec("部门", scope=PROJECT, rid="weak-only")
    strong = rec("alpha", scope=PROJECT, rid="strong")
    snapshot = snap(PROJECT, weak_only, strong, *filler(18, PROJECT))
    share = idf(20, 1) / (2 * idf(20, 1) + 2 * idf(20, 0))
    assert 0.12 < share < 0.25  # the same share for both records
    assert ids(rank([snapshot], "部署 alpha", top_k=5, now=NOW)) == ["strong"]
    # "部署" alone: 部 is now about a quarter of the query's weight, and that is enough.
    share_alone = idf(20, 1) / (idf(20, 1) + 2 * idf(20, 0))
    assert share_alone >= 0.25
    assert ids(rank([snapshot], "部署", top_k=5, now=NOW)) == ["weak-only"]


def test_a_scope_with_a_single_memory_still_finds_it_by_one_shared_word() -> None:
    # With N = 1 every word of the record has df = N; the IDF prior keeps it informative.
    only = rec("Use pnpm instead of npm for all JavaScript projects", rid="only")
    assert ids(rank([snap("global", only)], "pnpm or yarn", top_k=5, now=NOW)) == ["only"]
    assert ids(rank([snap("global", only)], "JavaScript package manager", top_k=5, now=NOW)) == ["only"]


def test_a_single_character_query_finds_records_containing_that_character() -> None:
    lock = rec("库存扣减要加行锁", rid="lock")
    hits = rank([snap("global", lock, "日志输出到 stderr", *filler(5))], "锁", top_k=5, now=NOW)
    assert ids(hits) == ["lock"] and hits[0].lexical > 0.5


def test_english_function_words_alone_never_make_a_hit() -> None:
    # Every record shares "what", "is", "the", "of" or "how" with these questions and nothing else.
    memories = [
        rec("The store is the directory of the memories", rid="store"),
        rec("What to do when the lock is stale: break it", rid="lock"),
        rec("How the relay finds the server of a project", rid="relay"),
        rec("Logs go to stderr, the protocol is on stdout", rid="logs"),
        *filler(4),
    ]
    snapshot = snap("global", *memories)
    for question in ("what is the capital of australia", "how tall is mount everest", "what is the"):
        assert rank([snapshot], question, top_k=5, now=NOW) == [], question
    # With one real word in common the stop words count in the share as before: all four shared.
    hits = rank([snapshot], "what is the lock", top_k=5, now=NOW)
    assert ids(hits) == ["lock"]


def test_the_stop_words_are_english_function_words_only() -> None:
    assert {"the", "of", "is", "what", "how", "a", "to", "in"} <= scoring.STOP_WORDS
    # Words that name a topic stay strong, and Chinese single characters keep their own rule.
    assert not {"lock", "store", "not", "no", "use", "的", "是"} & scoring.STOP_WORDS
    assert not is_weak_token("the") and scoring.is_stop_word("the") and not scoring.is_stop_word("锁")


def test_a_query_without_tokens_returns_nothing() -> None:
    assert rank([snap("global", "anything at all")], "!!! ...", top_k=5, now=NOW) == []


# --- boosts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("importance", "factor"),
    [
        pytest.param(None, 1.0, id="absent"),
        pytest.param(0.5, 1.0, id="half"),
        pytest.param(1.0, 1.25, id="one"),
        pytest.param(0.0, 0.75, id="zero"),
        pytest.param(0.9, 1.2, id="0.9"),
        pytest.param(7.0, 1.25, id="above-range-clamped"),
        pytest.param(-1.0, 0.75, id="below-range-clamped"),
        pytest.param(float("nan"), 1.0, id="nan"),
    ],
)
def test_importance_factor_is_neutral_when_absent_or_at_one_half(importance: float | None, factor: float) -> None:
    assert importance_factor(importance) == pytest.approx(factor)


def test_the_final_score_is_base_times_the_importance_factor_rounded_to_four_decimals() -> None:
    boosted = rec("alpha", rid="boosted", accessCount=3, importance=0.9)
    hits = rank([snap("global", boosted, *filler(3))], "alpha", top_k=5, now=NOW)
    assert hits[0].score == round(1.0 * importance_factor(0.9), 4) == 1.2


def test_a_generic_memory_does_not_climb_with_its_access_count() -> None:
    # A generic memory that matches many questions a little gets recalled (touched) on every one
    # of them; its count must not lift it over the memory that answers this question.
    generic = rec("notes about the project and the team and the plan", rid="generic")
    answer = rec("the release plan: ship the beta to the team on friday", rid="answer")
    snapshot = snap("global", generic, answer, *filler(8))
    before = rank([snapshot], "release plan for the team", top_k=5, now=NOW)
    assert ids(before)[0] == "answer"
    popular = snap("global", generic.with_changes(accessCount=10_000), answer, *filler(8))
    after = rank([popular], "release plan for the team", top_k=5, now=NOW)
    assert [(h.record.id, h.score) for h in after] == [(h.record.id, h.score) for h in before]


# --- ranking ---------------------------------------------------------------------------------


def test_results_are_ordered_by_score_then_scope_rank_then_recency_never_by_id() -> None:
    snapshots = [
        snap(
            "global",
            rec("alpha", rid="g-a-old", createdAt=NOW - 9000, updatedAt=NOW - 9000),
            rec("alpha", rid="g-b-new", createdAt=NOW - 5000, updatedAt=NOW - 5000),
            rec("alpha", rid="g-top", importance=1.0),
        ),
        snap("team notes", rec("alpha", rid="custom")),
        snap(PROJECT, rec("alpha", rid="project")),
        snap("session:s1", rec("alpha", rid="session")),
    ]
    hits = rank(snapshots, "alpha", top_k=10, now=NOW)
    assert ids(hits)[0] == "g-top" and hits[0].score == 1.25  # the only important one
    assert {h.score for h in hits[1:]} == {1.0}
    assert ids(hits)[1:] == ["session", "project", "custom", "g-b-new", "g-a-old"]
    assert [h.scope for h in hits[1:]] == ["session:s1", PROJECT, "team notes", "global", "global"]
    assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))


def test_a_tie_goes_to_the_more_recent_memory_then_the_later_line_never_to_the_smaller_id() -> None:
    # Equal scores after rounding: the ids sort one way, the dates the other.
    old = rec("alpha beta", rid="0000-old", createdAt=NOW - 86_400_000, updatedAt=NOW - 86_400_000)
    new = rec("alpha beta", rid="ffff-new", createdAt=NOW - 1000, updatedAt=NOW - 1000)
    assert ids(rank([snap("global", old, new, *filler(4))], "alpha", top_k=5, now=NOW)) == ["ffff-new", "0000-old"]
    # A deduped save re-affirms a memory (updatedAt moves): it counts as recent.
    reaffirmed = old.with_changes(updatedAt=NOW - 10)
    assert ids(rank([snap("global", reaffirmed, new, *filler(4))], "alpha", top_k=5, now=NOW)) == [
        "0000-old",
        "ffff-new",
    ]
    # Same time, same file order reversed: the later line (saved after) wins, whatever the ids.
    a = rec("alpha beta", rid="aaaa")
    z = rec("alpha beta", rid="zzzz")
    assert ids(rank([snap("global", z, a, *filler(4))], "alpha", top_k=5, now=NOW)) == ["aaaa", "zzzz"]
    assert ids(rank([snap("global", a, z, *filler(4))], "alpha", top_k=5, now=NOW)) == ["zzzz", "aaaa"]


def test_top_k_limits_the_results() -> None:
    snapshot = snap("global", *[rec("alpha", rid=f"r{i}") for i in range(10)])
    assert ids(rank([snapshot], "alpha", top_k=3, now=NOW)) == ["r9", "r8", "r7"]  # the last saved first
    assert rank([snapshot], "alpha", top_k=0, now=NOW) == []


def test_expired_records_never_appear() -> None:
    expired = rec("alpha", rid="expired", expiredAt=NOW - 1)
    expiring_later = rec("alpha", rid="later", expiredAt=NOW + 60_000)
    snapshot = snap("global", expired, expiring_later, *filler(3))
    assert ids(rank([snapshot], "alpha", top_k=5, now=NOW)) == ["later"]
    vector_only = rank([snapshot], "nothing shared", top_k=5, now=NOW, vector_scores={"expired": 0.9})
    assert vector_only == []


def test_an_id_found_in_several_snapshots_appears_once_with_its_best_entry() -> None:
    twin_global = rec("alpha", rid="twin")
    twin_project = rec("alpha", scope=PROJECT, rid="twin")
    hits = rank([snap("global", twin_global), snap(PROJECT, twin_project)], "alpha", top_k=5, now=NOW)
    assert ids(hits) == ["twin"] and hits[0].scope == PROJECT


def test_duplicates_across_snapshots_do_not_shrink_the_results_below_top_k() -> None:
    # Both copies of "twin" outscore "other"; after keeping one twin, "other" must fill the slot.
    twin_global = rec("alpha beta", rid="twin")
    twin_project = rec("alpha beta", scope=PROJECT, rid="twin")
    other = rec("alpha", rid="other")
    snapshots = [snap("global", twin_global, other, *filler(3)), snap(PROJECT, twin_project, *filler(3, PROJECT))]
    assert ids(rank(snapshots, "alpha beta", top_k=2, now=NOW)) == ["twin", "other"]


def test_a_vector_only_hit_is_returned_with_its_cosine() -> None:
    semantic = rec("用 pnpm 管理依赖", rid="semantic")
    hits = rank(
        [snap("global", semantic, *filler(3))], "package manager", top_k=5, now=NOW, vector_scores={"semantic": 0.81}
    )
    # A vector-only candidate scores its evidence above the gate: (0.81 − 0.5) / 0.5.
    assert hits == [Hit(record=semantic, scope="global", score=0.62, lexical=0.0, cosine=0.81)]


def test_vector_scores_below_one_half_are_ignored() -> None:
    semantic = rec("用 pnpm 管理依赖", rid="semantic")
    hits = rank([snap("global", semantic)], "package manager", top_k=5, now=NOW, vector_scores={"semantic": 0.49})
    assert hits == []


def test_vector_scores_for_unknown_ids_are_ignored() -> None:
    hits = rank([snap("global", rec("alpha"))], "zzz", top_k=5, now=NOW, vector_scores={"not-here": 0.9})
    assert hits == []


def test_the_hybrid_score_combines_both_channels_as_independent_chances() -> None:
    both = rec("alpha beta", rid="both")
    snapshot = snap("global", both, *filler(3))
    lexical_only = rank([snapshot], "alpha gamma", top_k=5, now=NOW)[0]
    fused = rank([snapshot], "alpha gamma", top_k=5, now=NOW, vector_scores={"both": 0.6})[0]
    strength = lexical_only.lexical
    assert 0.2 < strength < 0.8 and fused.lexical == strength and fused.cosine == 0.6
    # The vector score 0.6 is a 20 % chance; lexical strength s is a chance s: 1 − (1 − s)(1 − 0.2).
    assert fused.score == round(1 - (1 - strength) * (1 - 0.2), 4) > lexical_only.score
    # An exact lexical match is certain whatever the vector channel says.
    single = snap("global", rec("alpha", rid="exact"), *filler(3))
    exact = rank([single], "alpha", top_k=5, now=NOW, vector_scores={"exact": 0.6})[0]
    assert exact.lexical == 1.0 and exact.score == 1.0


def test_the_vector_channel_s_best_answer_stays_above_weak_hits_that_both_channels_half_found() -> None:
    # A conversation: the question shares "learning" and "play" with other turns (weak lexical
    # hits, strength 0.25) that the vector channel also finds, without conviction (a 30 % chance:
    # score 0.65); the turn that answers it shares none of its words and is the vector channel's
    # best candidate (a 50 % chance: score 0.75). Summing the two channels put the four weak turns
    # first (0.25 + 0.3 > 0.5); as independent chances they stay below (1 − 0.75·0.7 < 0.5).
    answer = rec("J: I started taking cello lessons last month.", rid="answer")
    weak = [rec(f"M: learning to play chess on evening {i}", rid=f"weak{i}") for i in range(4)]
    others = [rec(f"M: unrelated note number {i} about lunch", rid=f"z{i}") for i in range(20)]
    snapshot = snap("global", answer, *weak, *others)
    query = "Which instrument is Jordan learning to play?"
    lexical = rank([snapshot], query, top_k=5, now=NOW)
    assert sorted(ids(lexical)) == ["weak0", "weak1", "weak2", "weak3"]
    assert all(0.2 < h.lexical < 0.3 for h in lexical)
    vectors = {"answer": 0.75, **{f"weak{i}": 0.65 for i in range(4)}}
    hits = rank([snapshot], query, top_k=5, now=NOW, vector_scores=vectors)
    assert ids(hits)[0] == "answer" and hits[0].score == 0.5


def test_a_strong_lexical_hit_stays_above_a_weak_vector_neighbour() -> None:
    # The exact identifier is in one memory; the embedding model finds another one "close" (just
    # past its relevance gate, as e5 does for every chatty turn of a long conversation). Under
    # max(lexical, cosine) the neighbour's 0.6 beat the identifier's partial share of the question.
    exact = rec("DSH_MEMORY_STORE_DIR points at the store directory; change it in the env file", rid="exact")
    neighbour = rec("we talked about where things are kept on disk", rid="neighbour")
    others = [rec(f"unrelated note number {i} about lunch plans and the weather", rid=f"z{i}") for i in range(20)]
    snapshot = snap("global", exact, neighbour, *others)
    query = "what does DSH_MEMORY_STORE_DIR do and what is its default"
    hits = rank([snapshot], query, top_k=5, now=NOW, vector_scores={"neighbour": 0.6})
    assert ids(hits) == ["exact", "neighbour"]
    assert hits[0].lexical > 0.3 and hits[1].lexical == 0.0


def test_a_record_found_by_both_channels_beats_one_found_by_either_alone() -> None:
    both = rec("alpha gamma", rid="both")
    lexical_only = rec("alpha gamma", rid="lexical-only")
    vector_only = rec("something else entirely", rid="vector-only")
    snapshot = snap("global", both, lexical_only, vector_only, *filler(10))
    hits = rank([snapshot], "alpha gamma", top_k=5, now=NOW, vector_scores={"both": 0.8, "vector-only": 0.8})
    assert ids(hits) == ["both", "lexical-only", "vector-only"]


# --- the index cache -------------------------------------------------------------------------


def test_the_index_is_built_once_and_kept_on_the_snapshot_cache() -> None:
    snapshot = snap("global", "alpha", "beta")
    first = index_for(snapshot)
    assert snapshot.cache["lexical"] is first
    rank([snapshot], "alpha", top_k=5, now=NOW)
    assert index_for(snapshot) is first
    assert snapshot.cache["lexical"] is first


def test_a_new_snapshot_gets_its_own_index() -> None:
    old = snap("global", "alpha")
    new = Snap("global", (*old.records, rec("beta", rid="new")))
    assert index_for(new) is not index_for(old)
    assert ids(rank([new], "beta", top_k=5, now=NOW)) == ["new"]


def test_a_cached_index_for_other_records_is_not_reused() -> None:
    stale = LexicalIndex.build([rec("alpha")])
    snapshot = Snap("global", (rec("beta", rid="fresh"),), cache={"lexical": stale})
    assert ids(rank([snapshot], "beta", top_k=5, now=NOW)) == ["fresh"]


def _successor(old: Snap, new_records: Sequence[records.Record]) -> Snap:
    """The next version of a scope, seeded with the old index the way a store may seed it."""
    return Snap(old.scope, tuple(new_records), cache={"lexical_previous": index_for(old)})


def _all_scores(index: LexicalIndex, queries: Sequence[str]) -> list[dict[int, float]]:
    return [index.scores(scoring.query_tokens(q), threshold=0.0) for q in queries]


_PROBES = ["alpha", "beta gamma", "部署", "锁", "new words", "edited"]


def test_a_touch_reuses_the_previous_postings_and_picks_up_the_new_access_count() -> None:
    old = snap("global", rec("alpha", rid="a"), rec("beta gamma", rid="b"), rec("部署流程", rid="c"))
    touched = [r.with_changes(accessCount=5) if r.id == "a" else r for r in old.records]
    new = _successor(old, touched)
    index = index_for(new)
    assert index._tables.postings is index_for(old)._tables.postings  # nothing was tokenized again
    assert "lexical_previous" not in new.cache
    assert rank([new], "alpha", top_k=1, now=NOW)[0].record.access_count == 5


def test_an_append_extends_the_previous_index_without_changing_it() -> None:
    old = snap("global", rec("alpha", rid="a"), rec("beta gamma", rid="b"), rec("部署流程", rid="c"))
    before = _all_scores(index_for(old), _PROBES)
    new = _successor(old, [*old.records, rec("new words alpha", rid="d"), rec("锁", rid="e")])
    assert _all_scores(index_for(new), _PROBES) == _all_scores(LexicalIndex.build(new.records), _PROBES)
    assert _all_scores(index_for(old), _PROBES) == before  # the old version's index is untouched
    assert ids(rank([new], "new words", top_k=5, now=NOW)) == ["d"]


@pytest.mark.parametrize("order", ["older first", "newer first"])
def test_versions_seeded_with_one_old_index_share_its_tables_when_they_continue_one_line(order: str) -> None:
    """Several saves between two searches: every version is seeded with the last searched index
    (`snapshots.carry_forward`), so the second one to be searched finds the tables already grown
    past its seed by the first. On one line of appends (the store's shared `Rows`) it goes on from
    there; it used to copy every table (O(scope)) and refill the numpy columns from zero, which
    doubled a call's CPU under concurrent sessions."""
    from dsh_memory_mcp.store.snapshots import Rows

    base = Rows.of([rec("alpha", rid="a"), rec("beta gamma", rid="b"), rec("部署流程", rid="c")])
    v0 = Snap("global", base)  # type: ignore[arg-type]
    seed = index_for(v0)
    v1_rows = base.extended([rec("new words alpha", rid="d")])
    v2_rows = v1_rows.extended([rec("锁 gamma", rid="e"), rec("more words", rid="f")])
    v1 = Snap("global", v1_rows, cache={"lexical_previous": seed})  # type: ignore[arg-type]
    v2 = Snap("global", v2_rows, cache={"lexical_previous": seed})  # type: ignore[arg-type]
    first, second = (v1, v2) if order == "older first" else (v2, v1)
    index_for(first)
    index_for(second)
    assert index_for(v1)._tables is index_for(v2)._tables is seed._tables  # grown in place, never copied
    for version in (v0, v1, v2):
        assert _all_scores(index_for(version), _PROBES) == _all_scores(
            LexicalIndex.build(tuple(version.records)), _PROBES
        )
        assert index_for(version).average_length == LexicalIndex.build(tuple(version.records)).average_length
    # A sibling with other records (another writer's line after v1) still gets tables of its own.
    other = Snap(
        "global", v1_rows.extended([rec("elsewhere entirely", rid="g")]), cache={"lexical_previous": index_for(v1)}
    )  # type: ignore[arg-type]
    assert index_for(other)._tables is not seed._tables
    assert _all_scores(index_for(other), _PROBES) == _all_scores(LexicalIndex.build(tuple(other.records)), _PROBES)
    assert ids(rank([other], "elsewhere", top_k=5, now=NOW)) == ["g"]
    assert ids(rank([v2], "elsewhere", top_k=5, now=NOW)) == []


@pytest.mark.parametrize("change", ["edit", "remove", "reorder", "retag"])
def test_any_other_change_gives_the_same_index_as_a_fresh_build(change: str) -> None:
    base = [rec("alpha", rid="a"), rec("beta gamma", rid="b"), rec("部署流程", rid="c")]
    old = snap("global", *base)
    new_records = {
        "edit": [base[0].with_changes(content="edited alpha"), *base[1:]],
        "remove": base[1:],
        "reorder": [base[1], base[0], base[2]],
        "retag": [base[0], base[1].with_changes(tags=["edited"]), base[2]],
    }[change]
    new = _successor(old, new_records)
    assert _all_scores(index_for(new), _PROBES) == _all_scores(LexicalIndex.build(new.records), _PROBES)


# --- pruning is exact ------------------------------------------------------------------------

_STOPS = {"the", "of", "is"}  # English stop words: never a hit on their own
_VOCAB = ["common", "alpha", "beta", "gamma", "delta", "部署", "部", "署", "流程", "锁", "x_y", *sorted(_STOPS)]


def _brute_force(records_: Sequence[records.Record], query: str, threshold: float) -> dict[int, float]:
    """Every record scored on its own: the share decides the hit, BM25 over the query IDF is the strength."""
    token_lists = [tokenize(r.content + "\n" + "\n".join(r.tags)) for r in records_]
    docs = [set(tokens) for tokens in token_lists]
    lengths = [max(1, sum(1 for t in tokens if not is_weak_token(t))) for tokens in token_lists]
    avgdl = sum(lengths) / len(lengths)
    wanted = set(tokenize(query))
    df = {t: sum(t in d for d in docs) for t in wanted}
    weights = {t: idf(len(docs), df[t]) for t in wanted}
    total = sum(weights.values())
    strong_known = {t for t in wanted - _STOPS if not is_weak_token(t) and df[t]}
    common = {t for t in strong_known if len(docs) >= 20 and df[t] > 0.25 * (len(docs) + 3)}
    if common == strong_known:
        common = set()
    out = {}
    for pos, doc in enumerate(docs):
        shared = wanted & doc
        if not shared - _STOPS - common:
            continue
        share = sum(weights[t] for t in shared) / total
        strong = any(not is_weak_token(t) for t in shared - _STOPS - common)
        if share + 1e-9 >= (threshold if strong else max(threshold, 0.25)):
            strength = sum(weights[t] * _bm25(token_lists[pos].count(t), lengths[pos], avgdl) for t in shared)
            out[pos] = min(1.0, strength / total)
    return out


@settings(max_examples=200, deadline=None, database=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=5), min_size=1, max_size=60),
    query=st.lists(st.sampled_from([*_VOCAB, "absent", "量"]), min_size=1, max_size=5),
    threshold=st.sampled_from([0.10, 0.12]),
)
def test_pruned_scoring_gives_the_same_hits_as_scoring_every_record(
    docs: list[list[str]], query: list[str], threshold: float
) -> None:
    records_ = [rec("common " + " ".join(words), rid=f"r{i}") for i, words in enumerate(docs)]
    text = " ".join(query)
    got = LexicalIndex.build(records_).scores(scoring.query_tokens(text), threshold=threshold)
    expected = _brute_force(records_, text, threshold)
    assert got.keys() == expected.keys()
    for pos, share in expected.items():
        assert got[pos] == pytest.approx(share)


def test_a_version_indexed_while_another_thread_grows_the_postings_it_shares_does_not_fail() -> None:
    # A touch (same texts) hands the postings over to the new version's index; a save based on the
    # touched-away version then copies them while the new owner grows them with a save of its own
    # (serve under 16 sessions: "dictionary changed size during iteration").
    import sys
    import threading

    base = filler(3000)
    first = LexicalIndex.build(base)
    owner = LexicalIndex.build([r.with_changes(accessCount=1) for r in base], first)
    failures: list[BaseException] = []

    def grow() -> None:
        index = owner
        try:
            for k in range(400):
                index = LexicalIndex.build([*index.records, rec(f"grown{k} token{k}x and word{k}y")], index)
        except BaseException as exc:
            failures.append(exc)

    def copy() -> None:
        try:
            for k in range(60):
                copied = LexicalIndex.build([*base, rec(f"copied{k}")], first)
                assert len(copied) == len(base) + 1
        except BaseException as exc:
            failures.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=grow), threading.Thread(target=copy)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not failures, failures


_NEAR_WORDS = [f"w{i}" for i in range(40)] + ["部署", "缓存", "数据", "接口", "配置", "日志"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(_NEAR_WORDS), min_size=1, max_size=14), min_size=1, max_size=60),
    st.integers(min_value=0, max_value=59),
    st.lists(st.sampled_from(_NEAR_WORDS), max_size=3),
    st.integers(min_value=0, max_value=2),
)
def test_near_finds_exactly_the_records_a_pairwise_comparison_finds(
    texts: list[list[str]], base: int, added: list[str], dropped: int
) -> None:
    # The query is one record's words with a few dropped and a few added, so many records are
    # near it and many only share its words: the prefix and count bounds must lose none of them.
    words = texts[base % len(texts)]
    query = " ".join(words[dropped:] + added) or "w0"
    snap = Snap("global", tuple(rec(" ".join(ws), rid=f"r{i}") for i, ws in enumerate(texts)))
    mine = set(query.split())
    expected = {}
    for r in snap.records:
        theirs = set(r.content.split())
        similarity = len(mine & theirs) / len(mine | theirs)
        if similarity >= scoring.NEAR_JACCARD:
            expected[r.id] = round(similarity, 6)
    found = {r.id: round(similarity, 6) for r, similarity in scoring.near(snap, query, NOW)}
    assert len(expected) <= scoring.NEAR_CANDIDATES or len(found) >= scoring.NEAR_CANDIDATES
    if len(expected) <= scoring.NEAR_CANDIDATES:
        assert found == expected


def test_a_save_on_a_big_scope_nobody_indexed_checks_its_last_records_without_indexing_it() -> None:
    # serve's warm-up indexes a big scope in the background: a save meanwhile must not wait for
    # (or redo) that build; it still names a near-duplicate among the records just appended.
    many = [rec(f"note {i} about topic{i} and detail{i}", rid=f"r{i}") for i in range(scoring.NEAR_BUILD + 50)]
    last = rec("deploy the api gateway with blue green rollout on fridays", rid="last")
    first = rec("rotate the signing keys of the billing service every quarter", rid="first")
    big = Snap("global", (first, *many, last))
    found = scoring.near(big, "deploy the api gateway with blue green rollout on fridays please", NOW)
    assert [r.id for r, _ in found] == ["last"]
    assert scoring.CACHE_KEY not in big.cache
    assert scoring.near(big, "rotate the signing keys of the billing service every quarter now", NOW) == []
    # A scope small enough is indexed for the check, which then sees every record.
    small = Snap("global", (first, *many[:100], last))
    found = scoring.near(small, "rotate the signing keys of the billing service every quarter now", NOW)
    assert [r.id for r, _ in found] == ["first"]
    assert isinstance(small.cache.get(scoring.CACHE_KEY), LexicalIndex)
