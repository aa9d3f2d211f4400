"""Near-duplicate memories for people: the groups of a scope, and keeping one of a group.

`groups` links, within one scope, the live memories whose token sets (`scoring.near_tokens`) have a
Jaccard similarity of at least `scoring.NEAR_JACCARD` ("lexical", the rule a save's similarity check
uses too) and, with the vector channel on, those whose stored vectors' cosine is at least `COSINE_MIN`
("meaning"); pairs are joined into groups (connected components). Candidates come from a prefix filter:
each token set, rarest token first, is indexed by its first ``|s| - ceil(t·|s|) + 1`` tokens, which two
sets with Jaccard ≥ t always share (the all-pairs-similarity bound).

`keep` is "keep this one, replace the others": one save of the kept memory with ``supersedes`` = its id
and the others hidden in the same transaction (`SharedStore.save`'s ``merges``). Nothing is deleted:
`history.versions` lists the others under the kept memory, and restoring one brings its text back.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Literal, NamedTuple

from dsh_memory_mcp.errors import DshMemoryError
from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.history import find_one
from dsh_memory_mcp.service.render import ToolResult, error_result
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.texts import msg

#: Not the save's `SIMILAR_SCORE` (a calibrated score of a query embedding): record vectors of the
#: bundled model sit at 0.85–0.95 for related but different facts (and the same fact in another
#: language) and at 0.96–0.99 for the same fact reworded in one language (tests/test_duplicates.py).
COSINE_MIN = 0.955


class Group(NamedTuple):
    """Near-duplicates, newest first; `why` is "meaning" when a link was made by the vectors only."""

    why: Literal["lexical", "meaning"]
    records: list[Record]


def groups(service: MemoryService, scope: str) -> list[Group]:
    """The groups (two or more) of near-duplicates among the live records of `scope`; the groups
    with the most recently updated member first."""
    threshold = scoring.NEAR_JACCARD
    now = service.clock()
    records = [r for r in service.store.snapshot(scope).records if not r.is_expired(now)]
    sets = [scoring.near_tokens(r.content) for r in records]
    df = Counter(t for s in sets for t in s)
    parent = list(range(len(records)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    index: dict[str, list[int]] = {}
    for i, s in enumerate(sets):
        if not s:
            continue
        ordered = sorted(s, key=lambda t: (df[t], t))
        seen: set[int] = set()
        for t in ordered[: len(s) - math.ceil(threshold * len(s)) + 1]:
            for j in index.get(t, ()):
                if j in seen:
                    continue
                seen.add(j)
                other = sets[j]
                if min(len(s), len(other)) < threshold * max(len(s), len(other)):
                    continue  # the sizes alone rule it out
                shared = len(s & other)
                if shared >= threshold * (len(s) + len(other) - shared):
                    parent[root(i)] = root(j)
            index.setdefault(t, []).append(i)
    by_meaning = []
    position = {r.id: i for i, r in enumerate(records)}
    close = service.vectors.close_pairs(scope, list(position), COSINE_MIN) if service.vectors is not None else []
    for i, j in ((position[a], position[b]) for a, b in close):
        if root(i) != root(j):
            parent[root(i)] = root(j)
            by_meaning.append(i)
    meaning_roots = {root(i) for i in by_meaning}
    members: dict[int, list[Record]] = {}
    for i, record in enumerate(records):
        members.setdefault(root(i), []).append(record)
    found = [
        Group("meaning" if key in meaning_roots else "lexical", sorted(g, key=lambda r: r.updated_at, reverse=True))
        for key, g in members.items()
        if len(g) > 1
    ]
    found.sort(key=lambda g: g.records[0].updated_at, reverse=True)
    return found


def keep(
    service: MemoryService, ident: str, others: Sequence[str], ctx: CallContext
) -> tuple[Record | None, ToolResult]:
    """Keep memory `ident`, replacing `others` (ids or prefixes, live, of its scope): a new version
    of the kept one that supersedes it and hides the others (see the module docstring).
    ``GONE`` when one of them is no longer live; ``IDS_INVALID`` when one is the kept one or in another scope.
    """
    now = service.clock()
    found = find_one(service, ident)
    replaced = [find_one(service, other) for other in others]
    if found is None or found.is_expired(now) or any(r is None or r.is_expired(now) for r in replaced):
        return found, error_result("GONE", msg("这组记忆已有变化(被删除或修改):请刷新后再选。"))
    ids = [r.id for r in replaced if r is not None]
    if not ids or found.id in ids or any(r is None or r.scope != found.scope for r in replaced):
        return found, error_result("IDS_INVALID", msg("要替换的记忆必须是同一作用域里的其它记忆。"))
    source: dict[str, str] = {"origin": "explicit"}
    if ctx.client:
        source["client"] = ctx.client
    try:
        with service.foreground.call():
            result = service.store.save(
                found.scope,
                found.content,
                kind=found.kind,
                tags=found.tags,
                importance=found.importance,
                supersedes=found.id,
                source=source,
                merges=ids,
            )
    except DshMemoryError as exc:
        return found, error_result(exc.code, exc.message)
    record = result.record
    if not result.deduped and service.vectors is not None:
        service.vectors.record_saved(record.scope, record)
    merged = record.data.get("merged") or []
    text = msg(
        "已保留 {short}:新版本 {new_id} 取代了另外 {count} 条(它们留在磁盘上,可在这条记忆的历史里恢复)",
        short=found.short_id,
        new_id=record.short_id,
        count=len(merged),
    )
    return found, ToolResult(
        text=text,
        structured={"ok": True, "id": record.id, "scope": record.scope, "kept": found.id, "replaced": merged},
    )
