"""Relevance of the lexical channel on a realistic table of memories (vectors off).

Each query must put its expected ids in the top 5 (or return nothing when nothing is relevant);
a summary test prints recall@5 and MRR (`pytest tests/test_relevance.py -s` shows them) and
guards recall@5 ≥ 0.9 so a regression in the tokenizer or the thresholds is caught as a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.store import records
from tests.helpers.relevance_corpus import GLOBAL, MEMORIES, PROJECT, QUERIES, Query

NOW = 1_790_000_000_000
TOP_K = 5


@dataclass(frozen=True)
class Snapshot:
    scope: str
    records: tuple[records.Record, ...]
    cache: dict[str, Any] = field(default_factory=dict)


def _snapshot(scope: str) -> Snapshot:
    return Snapshot(
        scope,
        tuple(
            records.new_record(scope=m.scope, content=m.content, kind=m.kind, tags=m.tags, now=NOW, record_id=m.id)
            for m in MEMORIES
            if m.scope == scope
        ),
    )


# Built once: the snapshots are immutable and the index cache is exactly what a server reuses.
SNAPSHOTS = (_snapshot(PROJECT), _snapshot(GLOBAL))


def _search(text: str) -> list[str]:
    return [hit.record.id for hit in scoring.rank(SNAPSHOTS, text, top_k=TOP_K, now=NOW)]


@pytest.mark.parametrize("query", QUERIES, ids=[q.text for q in QUERIES])
def test_each_query_finds_its_memories_in_the_top_five(query: Query) -> None:
    found = _search(query.text)
    if not query.expected:
        assert found == [], f"{query.why}: expected nothing, got {found}"
    for expected in query.expected:
        assert expected in found, f"{query.why}: {expected} not in top {TOP_K} {found}"


def test_recall_at_five_and_mrr_over_the_table_are_reported_and_high() -> None:
    relevant = retrieved = 0
    reciprocal_ranks: list[float] = []
    empty_ok = empty_total = 0
    for query in QUERIES:
        found = _search(query.text)
        if not query.expected:
            empty_total += 1
            empty_ok += found == []
            continue
        relevant += len(query.expected)
        retrieved += sum(1 for e in query.expected if e in found)
        ranks = [found.index(e) + 1 for e in query.expected if e in found]
        reciprocal_ranks.append(1 / min(ranks) if ranks else 0.0)
    recall = retrieved / relevant
    mrr = sum(reciprocal_ranks) / len(reciprocal_ranks)
    print(
        f"\nrelevance: {len(MEMORIES)} memories, {len(QUERIES)} queries -> "
        f"recall@{TOP_K}={recall:.3f} MRR={mrr:.3f} empty-queries-correct={empty_ok}/{empty_total}"
    )
    assert len(MEMORIES) >= 45 and len(QUERIES) >= 30
    assert recall >= 0.9
    assert empty_ok == empty_total
