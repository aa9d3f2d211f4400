"""The lexical ranking against a reference written here: plain BM25 over every record, no pruning.

`scoring.rank` runs vectorised (numpy) for searches over `scoring.VECTORISE_MIN` records or more
and in plain loops below it; both must give exactly the ranking this file's straightforward
reference computes from the rules in `search.scoring`'s docstring, on random bilingual stores,
after in-place extensions of an index and after another process appended to the scope file.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.search.scoring import Hit, LexicalIndex, index_for, is_weak_token, tokenize
from dsh_memory_mcp.store import records, scopes
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import subprocess_env

NOW = 1_790_000_000_000
PROJECT = "project:/home/dev/app"
EN = [
    "deploy",
    "pipeline",
    "postgres",
    "database",
    "docker",
    "image",
    "cache",
    "redis",
    "cluster",
    "staging",
    "release",
    "branch",
    "migration",
    "schema",
    "backup",
    "nightly",
    "frontend",
    "build",
    "token",
    "auth",
    "service",
    "worker",
    "queue",
    "billing",
]
STOP = ["the", "of", "is", "to", "what", "and"]
ZH = "部署流水线数据库迁移缓存鉴权服务测试用例发布分支代码审查监控告警的了是在"


@dataclass(frozen=True)
class Snap:
    scope: str
    records: Sequence[records.Record]
    cache: dict[str, Any] = field(default_factory=dict)


def _text(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(1, 12)):
        roll = rng.random()
        if roll < 0.45:
            parts.append(rng.choice(EN))
        elif roll < 0.55:
            parts.append(rng.choice(STOP))
        elif roll < 0.6:
            parts.append(f"{rng.choice(EN)}_{rng.choice(EN)}")
        else:
            start = rng.randrange(len(ZH) - 4)
            parts.append(ZH[start : start + rng.randint(1, 4)])
    return " ".join(parts)


def _record(rng: random.Random, i: int, scope: str) -> records.Record:
    created = NOW - rng.randint(0, 5) * 1000  # few distinct times: ties reach the later keys
    record = records.new_record(
        scope=scope,
        content=_text(rng),
        tags=rng.sample(["ops", "db", "运维"], rng.randint(0, 1)),
        importance=rng.choice([None, None, 0.0, 0.5, 1.0, 0.73]),
        now=created,
        record_id=f"r{i:06d}-{scope[:3]}",
    )
    changes: dict[str, Any] = {}
    if rng.random() < 0.1:
        changes["updatedAt"] = created + rng.randint(1, 3) * 1000
    if rng.random() < 0.05:
        changes["expiredAt"] = NOW + rng.choice([-1, 1]) * 1000
    return record.with_changes(**changes) if changes else record


def _queries(rng: random.Random, count: int) -> list[str]:
    out = ["的", "the deploy", "数据库 的 is", "redis", "unknownword cache", "部署 of the"]
    for _ in range(count):
        words = [rng.choice(EN + STOP + ["nothinghere"]) for _ in range(rng.randint(1, 4))]
        start = rng.randrange(len(ZH) - 3)
        if rng.random() < 0.5:
            words.append(ZH[start : start + rng.randint(1, 3)])
        out.append(" ".join(words))
    return out


# --- the reference ---------------------------------------------------------------------------
_docs: dict[bytes, tuple[Counter[str], int]] = {}


def _doc(record: records.Record) -> tuple[Counter[str], int]:
    """A record's term frequencies and length (tokens other than single CJK characters)."""
    key = record.raw.encode("utf-8", "surrogatepass")
    got = _docs.get(key)
    if got is None:
        text = record.content[: scoring.INDEX_CHARS]
        tokens = tokenize(text + "\n" + "\n".join(record.tags) if record.tags else text)
        weak = sum(1 for t in tokens if is_weak_token(t))
        got = _docs[key] = (Counter(tokens), max(1, len(tokens) - weak))
    return got


def _reference_scores(recs: Sequence[records.Record], query: str, threshold: float) -> dict[int, float]:
    """BM25 by the book of `search.scoring`'s docstring, record by record, over every record."""
    k1, b = 1.2, 0.3
    docs = [_doc(record) for record in recs]
    n = len(docs)
    if n == 0:
        return {}
    avg = sum(dl for _, dl in docs) / n
    qtokens = set(tokenize(query))
    df = {t: sum(1 for tf, _ in docs if t in tf) for t in qtokens}
    weight = {t: math.log(1 + (n + 3 - df[t] + 0.5) / (df[t] + 0.5)) for t in qtokens}
    total = sum(weight.values())
    strongish = [t for t in qtokens if df[t] and not is_weak_token(t) and t not in scoring.STOP_WORDS]
    common = {t for t in strongish if n >= 20 and df[t] > 0.25 * (n + 3)}
    if len(common) == len(strongish):
        common = set()
    out = {}
    for pos, (tf, dl) in enumerate(docs):
        shared = [t for t in qtokens if t in tf]
        if not shared:
            continue
        share = sum(weight[t] for t in shared) / total
        if any(t in strongish and t not in common for t in shared):
            need = threshold
        elif any(is_weak_token(t) for t in shared):
            need = max(threshold, 0.25)
        else:
            continue
        if share + 1e-9 < need:
            continue
        bm25 = sum(weight[t] * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * max(dl, avg) / avg)) for t in shared)
        out[pos] = min(1.0, bm25 / total)
    return out


def _reference_rank(
    snaps: Sequence[Snap], query: str, top_k: int, vectors: dict[str, float] | None = None
) -> list[tuple[str, float]]:
    entries = []
    for number, s in enumerate(snaps):
        threshold = 0.12 if s.scope == scopes.GLOBAL else 0.10
        bases = _reference_scores(s.records, query, threshold)
        for pos, record in enumerate(s.records):
            vector = (vectors or {}).get(record.id)
            if vector is not None and vector >= 0.5:  # the two channels as independent chances
                bases[pos] = 1 - (1 - bases.get(pos, 0.0)) * (1 - (vector - 0.5) / 0.5)
        for pos, strength in bases.items():
            record = s.records[pos]
            if record.expired_at is not None and record.expired_at < NOW:
                continue
            factor = scoring.importance_factor(record.importance)
            score = round(strength * factor, 4)
            recency = max(record.updated_at, record.created_at)
            entries.append(((-score, scopes.scope_rank(s.scope), -factor, -recency, -pos, number), record.id, score))
    entries.sort()
    out: list[tuple[str, float]] = []
    for _key, rid, score in entries:
        if rid not in {r for r, _ in out}:
            out.append((rid, score))
    return out[:top_k]


def _pairs(hits: Sequence[Hit]) -> list[tuple[str, float]]:
    return [(h.record.id, h.score) for h in hits]


def _both_paths(
    snaps: Sequence[Snap], query: str, top_k: int, vectors: dict[str, float] | None = None
) -> tuple[list[Hit], list[Hit]]:
    indexes = [(s.scope, index_for(s)) for s in snaps]
    tokens = scoring.query_tokens(query)
    gated = {rid: v for rid, v in (vectors or {}).items() if v >= scoring.MIN_COSINE}  # as `rank` hands them on
    vectorised = scoring._rank_arrays(np, indexes, tokens, top_k, NOW, gated)
    assert vectorised is not None
    return vectorised, scoring._rank_loops(indexes, tokens, top_k, NOW, gated)


# --- the tests -------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_both_search_paths_rank_random_bilingual_stores_exactly_like_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    snaps = [
        Snap(scopes.GLOBAL, tuple(_record(rng, i, scopes.GLOBAL) for i in range(rng.randint(150, 400)))),
        Snap(PROJECT, tuple(_record(rng, i, PROJECT) for i in range(rng.randint(30, 200)))),
    ]
    every = [r.id for s in snaps for r in s.records]
    for number, query in enumerate(_queries(rng, 25)):
        # Every other query also has vector candidates (some below the 0.5 gate, some lexical hits too).
        vectors = {rid: rng.uniform(0.45, 1.0) for rid in rng.sample(every, 12)} if number % 2 else None
        ranking = _reference_rank(snaps, query, len(every), vectors)
        for top_k in (1, 5, 30):
            vectorised, loops = _both_paths(snaps, query, top_k, vectors)
            assert _pairs(vectorised) == ranking[:top_k], (query, top_k)
            assert vectorised == loops, (query, top_k)  # the same Hit objects' values, lexical strengths included


def test_an_index_extended_in_place_ranks_like_the_reference_after_every_append() -> None:
    rng = random.Random(7)
    recs = [_record(rng, i, scopes.GLOBAL) for i in range(300)]
    rows: list[records.Record] = list(recs)
    previous: LexicalIndex | None = None
    queries = _queries(rng, 6)
    for step in range(6):
        index = LexicalIndex.build(tuple(rows), previous)
        if previous is not None:
            assert index.text_tables()[0] is previous.text_tables()[0]  # grown in place, not rebuilt
        s = Snap(scopes.GLOBAL, index.records, {scoring.CACHE_KEY: index})
        for query in queries:
            vectorised, loops = _both_paths([s], query, 10)
            assert _pairs(vectorised) == _reference_rank([s], query, 10) == _pairs(loops), (step, query)
        # The older index still sees only its own records, after its tables grew under it.
        if previous is not None:
            old = Snap(scopes.GLOBAL, previous.records, {scoring.CACHE_KEY: previous})
            assert _pairs(_both_paths([old], queries[0], 10)[0]) == _reference_rank([old], queries[0], 10)
        previous = index
        rows.extend(_record(rng, 1000 + step * 50 + j, scopes.GLOBAL) for j in range(rng.randint(1, 40)))


APPEND = """
import sys
from dsh_memory_mcp.store.shared import SharedStore
store = SharedStore(sys.argv[1])
for i, text in enumerate(sys.argv[2:]):
    store.save("global", text, tags=["运维"] if i % 2 else [])
store.close()
"""


def test_a_big_scope_searched_vectorised_ranks_like_the_reference_after_another_process_appended(
    tmp_path: Path,
) -> None:
    rng = random.Random(11)
    size = scoring.VECTORISE_MIN + 200
    path = tmp_path / scopes.scope_file_relpath(scopes.GLOBAL)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(_record(rng, i, scopes.GLOBAL).raw.encode() + b"\n" for i in range(size)))
    store = SharedStore(str(tmp_path))
    try:
        deadline = time.monotonic() + 30
        while scoring._numpy() is None:  # a server imports it on a thread; the loops serve meanwhile
            assert time.monotonic() < deadline
            time.sleep(0.01)
        queries = _queries(rng, 8)
        first = store.snapshot(scopes.GLOBAL)
        for query in queries:
            assert _pairs(scoring.rank([first], query, top_k=8, now=NOW)) == _reference_rank([first], query, 8)
        texts = ["deploy redis 部署流水线 deploy", "the cache 缓存 of the cluster", "数据库迁移 migration schema"]
        done = subprocess.run(
            [sys.executable, "-c", APPEND, str(tmp_path), *texts],
            env=subprocess_env(),
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        later = store.snapshot(scopes.GLOBAL)
        assert len(later.records) == size + 3
        assert index_for(later).text_tables()[0] is index_for(first).text_tables()[0]  # extended, not rebuilt
        for query in [*queries, *texts]:
            # The foreign records were saved now, not at NOW: the reference orders them the same way.
            assert _pairs(scoring.rank([later], query, top_k=8, now=NOW)) == _reference_rank([later], query, 8)
    finally:
        store.close()


def test_record_times_beyond_int64_fall_back_to_the_loops_with_the_same_ranking() -> None:
    rng = random.Random(5)
    recs = [_record(rng, i, scopes.GLOBAL) for i in range(200)]
    recs[3] = recs[3].with_changes(updatedAt=10**30, content="deploy redis 部署")
    s = Snap(scopes.GLOBAL, tuple(recs))
    indexes = [(s.scope, index_for(s))]
    assert scoring._rank_arrays(np, indexes, scoring.query_tokens("deploy"), 5, NOW, {}) is None
    assert _pairs(scoring._rank_loops(indexes, scoring.query_tokens("deploy"), 5, NOW, {})) == _reference_rank(
        [s], "deploy", 5
    )
