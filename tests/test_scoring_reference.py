"""The lexical ranking against a reference written here: plain BM25 over every record, no pruning.

`scoring.rank` (numpy columns, MaxScore pruning, contenders only sorted) must give exactly the
ranking this file's straightforward record-by-record reference computes from the rules in
`search.scoring`'s docstring: on random bilingual stores with vector candidates, after in-place
extensions of an index, after another process appended to the scope file, and with record times
another writer left beyond int64.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.search.scoring import Hit, LexicalIndex, is_weak_token, tokenize
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


def _ranked(snaps: Sequence[Snap], query: str, top_k: int, vectors: dict[str, float] | None = None) -> list[Hit]:
    return scoring.rank(snaps, query, top_k=top_k, now=NOW, vector_scores=vectors)


# --- the tests -------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rank_orders_random_bilingual_stores_exactly_like_the_reference(seed: int) -> None:
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
        strengths = [_reference_scores(s.records, query, 0.12 if s.scope == scopes.GLOBAL else 0.10) for s in snaps]
        for top_k in (1, 5, 30):
            hits = _ranked(snaps, query, top_k, vectors)
            assert _pairs(hits) == ranking[:top_k], (query, top_k)
            for hit in hits:  # the lexical strength that counted, as the reference computes it
                number = 0 if hit.scope == scopes.GLOBAL else 1
                pos = [r.id for r in snaps[number].records].index(hit.record.id)
                assert hit.lexical == pytest.approx(strengths[number].get(pos, 0.0), abs=1e-12), (query, hit)


def test_an_index_extended_in_place_ranks_like_the_reference_after_every_append() -> None:
    rng = random.Random(7)
    recs = [_record(rng, i, scopes.GLOBAL) for i in range(300)]
    rows: list[records.Record] = list(recs)
    previous: LexicalIndex | None = None
    queries = _queries(rng, 6)
    for step in range(6):
        index = LexicalIndex.build(tuple(rows), previous)
        s = Snap(scopes.GLOBAL, index.records, {scoring.CACHE_KEY: index})
        for query in queries:
            assert _pairs(_ranked([s], query, 10)) == _reference_rank([s], query, 10), (step, query)
        # The older index still sees only its own records, after the tables it shares grew.
        if previous is not None:
            old = Snap(scopes.GLOBAL, previous.records, {scoring.CACHE_KEY: previous})
            assert _pairs(_ranked([old], queries[0], 10)) == _reference_rank([old], queries[0], 10)
        previous = index
        rows.extend(_record(rng, 1000 + step * 50 + j, scopes.GLOBAL) for j in range(rng.randint(1, 40)))


def test_appends_of_one_few_and_many_records_rank_like_the_reference() -> None:
    # A few records are indexed in a plain loop, more with numpy: the tables must come out the same,
    # including term frequencies a word gets only in a later record ("deploy deploy").
    rng = random.Random(11)
    rows: list[records.Record] = [_record(rng, i, scopes.GLOBAL) for i in range(50)]
    previous: LexicalIndex | None = None
    queries = [*_queries(rng, 4), "deploy", "部署 deploy"]
    for step, size in enumerate((1, 3, 8, 9, 40, 2, 1, 100)):
        index = LexicalIndex.build(tuple(rows), previous)
        s = Snap(scopes.GLOBAL, index.records, {scoring.CACHE_KEY: index})
        for query in queries:
            assert _pairs(_ranked([s], query, 10)) == _reference_rank([s], query, 10), (step, query)
        previous = index
        extra = [_record(rng, 2000 + step * 50 + j, scopes.GLOBAL) for j in range(size)]
        extra[0] = records.new_record(scope=scopes.GLOBAL, content=f"deploy deploy 部署部署 step {step}", now=NOW)
        rows.extend(extra)


APPEND = """
import sys
from dsh_memory_mcp.store.shared import SharedStore
store = SharedStore(sys.argv[1])
for i, text in enumerate(sys.argv[2:]):
    store.save("global", text, tags=["运维"] if i % 2 else [])
store.close()
"""


def test_a_big_scope_ranks_like_the_reference_after_another_process_appended(tmp_path: Path) -> None:
    rng = random.Random(11)
    size = 2200
    path = tmp_path / scopes.scope_file_relpath(scopes.GLOBAL)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(_record(rng, i, scopes.GLOBAL).raw.encode() + b"\n" for i in range(size)))
    store = SharedStore(str(tmp_path))
    try:
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
        for query in [*queries, *texts]:
            # The foreign records were saved now, not at NOW: the reference orders them the same way.
            assert _pairs(scoring.rank([later], query, top_k=8, now=NOW)) == _reference_rank([later], query, 8)
    finally:
        store.close()


def test_record_times_beyond_int64_rank_like_the_reference() -> None:
    rng = random.Random(5)
    recs = [_record(rng, i, scopes.GLOBAL) for i in range(200)]
    recs[3] = recs[3].with_changes(updatedAt=10**30, content="deploy redis 部署")
    recs[9] = recs[9].with_changes(expiredAt=10**30, content="deploy redis 部署")  # expires never, in effect
    recs[12] = recs[12].with_changes(expiredAt=-(10**30), content="deploy redis 部署")  # long expired
    s = Snap(scopes.GLOBAL, tuple(recs))
    for query in ("deploy", "redis 部署"):
        assert _pairs(_ranked([s], query, 5)) == _reference_rank([s], query, 5)
