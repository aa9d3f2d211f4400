"""The relevance gate: when is a cosine a match, for *this* model? (docs/design.md: Relevance gate)

The gate comes from the model's own background per (query script → record script) cell: `PROBES`
embedded once, their pairwise cosines per cell (`calibrate`). Seed cells keep ``cosine ≥ 0.5``;
adaptive cells need the query's best probe cosine plus `MARGIN_SPREADS` spreads (`Calibration.floors`).
How likely a gated candidate is relevant comes from its z-score among the query's own margins
(`relevance_scores`). Cached per model id, width and input scheme in ``<store>/.vectors/calibration.json``.
"""

from __future__ import annotations

import base64
import functools
import heapq
import json
import math
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.texts import Text, msg

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: The seed's rule (docs/design.md: Search): below this no model's cosine is a match.
SEED_GATE = 0.5
#: A candidate must beat the query's best probe cosine by this many cell spreads.
MARGIN_SPREADS = 0.75
#: The chance that a vector candidate is relevant, ``σ(RELEVANCE_Z·z + RELEVANCE_BEST·best + RELEVANCE_BIAS)``
#: (see the module docstring and `relevance`). Fitted on both evaluation sets, rounded to one decimal.
RELEVANCE_Z = 1.7
RELEVANCE_BEST = 2.0
RELEVANCE_BIAS = -6.0
#: Bump when PROBES or the rule change: cached calibrations of another version are recomputed.
VERSION = 3
CALIBRATION_FILE = os.path.join(".vectors", "calibration.json")
CELLS = ("zh-zh", "zh-en", "en-zh", "en-en")

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_SPACE = re.compile(r"\s+")


def is_cjk(text: str) -> bool:
    """Whether `text` is mostly CJK (> 30 % of its non-space characters, first 400 looked at)."""
    head = _SPACE.sub("", text[:400])
    return bool(head) and len(_CJK.findall(head)) > 0.3 * len(head)


PROBES: tuple[str, ...] = (
    "周末去爬山记得带雨衣",
    "这家面馆的牛肉面很好吃",
    "奶奶的生日在十月初",
    "地铁二号线早高峰很挤",
    "阳台上的绿萝需要每周浇水",
    "小区的快递柜在东门旁边",
    "明年计划去云南旅游",
    "羽毛球拍的线该换了",
    "冰箱里的牛奶快过期了",
    "钢琴课改到周六上午",
    "车子的保险下个月到期",
    "楼下新开了一家书店",
    "The garden hose is in the garage.",
    "Grandpa likes to watch football on Sundays.",
    "The library closes early on holidays.",
    "Remember to renew the passport before summer.",
    "The bakery on the corner sells sourdough bread.",
    "Our neighbour's dog barks at the mail carrier.",
    "The bicycle tyre needs more air.",
    "Tickets for the concert go on sale on Friday.",
    "The hotel breakfast starts at seven.",
    "Winter coats are stored in the attic.",
    "The river trail is closed for repairs.",
    "She is learning to knit a scarf.",
)


@dataclass(frozen=True)
class Cell:
    """Background of one (query script → record script) pair."""

    background: float  # mean cosine of unrelated probe pairs
    spread: float  # their standard deviation
    p99: float

    @property
    def seed(self) -> bool:
        """Whether the seed's plain ``cosine ≥ 0.5`` is safe here (unrelated pairs stay below it)."""
        return self.p99 < SEED_GATE - self.spread

    def floor(self, null: float) -> float:
        """The gate for a query whose best cosine to the probes of the record's script is `null`."""
        return SEED_GATE if self.seed else max(SEED_GATE, null + MARGIN_SPREADS * self.spread)


@dataclass(frozen=True)
class Calibration:
    """One model's background per cell, and the probes' record vectors for the per-query null."""

    model: str
    dims: int
    scheme: str
    cells: dict[str, Cell]
    probe_vectors: npt.NDArray[np.float32]  # unit rows, PROBES order
    typical_floor: dict[str, float]  # the floor an average probe query gets, per cell (doctor)

    @property
    def seed_rule(self) -> bool:
        return all(cell.seed for cell in self.cells.values())

    def floors(self, q: npt.NDArray[np.float32], query_cjk: bool) -> tuple[float, float]:
        """The cosine a record must reach for the unit query vector `q`: (CJK record, other record)."""
        import numpy as np

        null = self.probe_vectors @ q
        mask = _probe_mask()
        return (
            self.cells[_cell(query_cjk, True)].floor(float(np.max(null[mask]))),
            self.cells[_cell(query_cjk, False)].floor(float(np.max(null[~mask]))),
        )

    def probe_margins(
        self, q: npt.NDArray[np.float32], floor_cjk: float, floor_other: float
    ) -> npt.NDArray[np.float64]:
        """The probes' margins over the gates `floors` gave `q`: part of the query's background."""
        import numpy as np

        mask = _probe_mask()
        floors = np.where(mask, floor_cjk, floor_other)
        return margins(self.probe_vectors @ q, floors)

    def lines(self) -> list[Text]:
        """Chinese lines for doctor: background and gate per cell."""
        out = []
        for name in CELLS:
            cell = self.cells[name]
            gate = (
                msg("沿用默认 ≥0.50")
                if cell.seed
                else msg("自适应,典型门限 {typical_floor}", typical_floor=f"{self.typical_floor[name]:.2f}")
            )
            out.append(
                msg(
                    "{name}:背景相似度 均值 {background} 波动 {spread} 99% 分位 {p99};{gate}",
                    name=name,
                    background=f"{cell.background:.2f}",
                    spread=f"{cell.spread:.2f}",
                    p99=f"{cell.p99:.2f}",
                    gate=gate,
                )
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "model": self.model,
            "dims": self.dims,
            "scheme": self.scheme,
            "cells": {k: [c.background, c.spread, c.p99] for k, c in self.cells.items()},
            "typical_floor": self.typical_floor,
            "probes": base64.b64encode(self.probe_vectors.astype("<f4").tobytes()).decode("ascii"),
        }

    @classmethod
    def from_json(cls, data: Any) -> Calibration | None:
        import numpy as np

        try:
            if data.get("version") != VERSION:
                return None
            dims = int(data["dims"])
            raw = base64.b64decode(data["probes"], validate=True)
            vectors = np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(len(PROBES), dims)
            cells = {k: Cell(*(float(x) for x in data["cells"][k])) for k in CELLS}
            floors = {k: float(data["typical_floor"][k]) for k in CELLS}
        except (AttributeError, KeyError, TypeError, ValueError):
            return None
        numbers = [x for c in cells.values() for x in (c.background, c.spread, c.p99)] + list(floors.values())
        if not all(math.isfinite(x) for x in numbers) or not np.isfinite(vectors).all():
            return None
        return cls(str(data["model"]), dims, str(data["scheme"]), cells, vectors, floors)


def margins(cosines: npt.NDArray[Any], floors: npt.NDArray[Any] | float) -> npt.NDArray[np.float64]:
    """``(cosine − floor)/(1 − floor)``: 0 at the gate, 1 at cosine 1, negative below the gate."""
    import numpy as np

    gate = np.asarray(floors, dtype=np.float64)
    out: npt.NDArray[np.float64] = (np.asarray(cosines, dtype=np.float64) - gate) / np.maximum(1.0 - gate, 1e-6)
    return out


def relevance(z: float, best: bool) -> float:
    """The chance that a candidate is relevant, from its z-score in the query's background and
    whether it is the query's best candidate (see the module docstring)."""
    x = RELEVANCE_Z * z + (RELEVANCE_BEST if best else 0.0) + RELEVANCE_BIAS
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def relevance_scores(
    found: list[tuple[float, str]], background: npt.NDArray[np.float64], limit: int
) -> dict[str, float]:
    """id → ``0.5 + 0.5·P(relevant)`` for the `limit` best gated candidates (`found`: (margin, id)).

    `background` holds the margins of every record searched and of the probes for this query.
    Each id once, with its best margin; the best candidate is the one with the highest margin
    (ties: the greater id, so the choice does not depend on the order scopes were read).
    """
    import numpy as np

    picked: dict[str, float] = {}
    for margin, rid in heapq.nlargest(limit, found):
        picked.setdefault(rid, margin)
    if not picked:
        return {}
    mean = float(np.mean(background)) if len(background) else 0.0
    std = float(np.std(background)) if len(background) > 1 else 0.0
    best = next(iter(picked))
    out = {}
    for rid, margin in picked.items():
        z = (margin - mean) / std if std > 1e-9 else 0.0
        out[rid] = 0.5 + 0.5 * relevance(z, rid == best)
    return out


def _cell(q_cjk: bool, rec_cjk: bool) -> str:
    return f"{'zh' if q_cjk else 'en'}-{'zh' if rec_cjk else 'en'}"


@functools.lru_cache(maxsize=1)
def _probe_mask() -> npt.NDArray[np.bool_]:
    """Which of `PROBES` are CJK (numpy is imported on first use only)."""
    import numpy as np

    return np.array([is_cjk(p) for p in PROBES], dtype=bool)


def cache_key(model: str, dims: int, scheme: str) -> str:
    return f"{model}\t{dims}\t{scheme}"


def calibrate(
    vectors: npt.NDArray[np.float32],
    *,
    model: str,
    scheme: str,
    query_vectors: npt.NDArray[np.float32] | None = None,
) -> Calibration:
    """The background of `PROBES` embedded by the model as memories (unit rows, `PROBES` order).

    `query_vectors` are the same probes embedded as questions, when the model marks the two
    differently: the background is then a question against the *other* probes as memories, which
    is what a search compares. Without them both sides are `vectors`.
    """
    import numpy as np

    mask = _probe_mask()
    queries = vectors if query_vectors is None else query_vectors
    sims = (queries @ vectors.T).astype(np.float64)
    off = ~np.eye(len(sims), dtype=bool)
    cells: dict[str, Cell] = {}
    typical: dict[str, float] = {}
    for q_cjk in (True, False):
        for rec_cjk in (True, False):
            name = _cell(q_cjk, rec_cjk)
            block = np.outer(mask == q_cjk, mask == rec_cjk) & off
            values = sims[block]
            cell = Cell(
                round(float(values.mean()), 4),
                round(float(values.std()), 4),
                round(float(np.quantile(values, 0.99)), 4),
            )
            cells[name] = cell
            # The floor a probe of the query's script gets against the other probes of the record's.
            rows = sims[mask == q_cjk][:, mask == rec_cjk]
            best = np.where(off[mask == q_cjk][:, mask == rec_cjk], rows, -np.inf).max(axis=1)
            typical[name] = round(cell.floor(float(best.mean())), 4)
    return Calibration(model, int(vectors.shape[1]), scheme, cells, vectors.astype(np.float32), typical)


def _path(store_root: str) -> str:
    return os.path.join(store_root, CALIBRATION_FILE)


def _read_all(store_root: str) -> dict[str, Any]:
    try:
        with open(_path(store_root), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_cached(store_root: str, model: str, dims: int, scheme: str) -> Calibration | None:
    """The cached calibration for this model, width and scheme (None when absent, stale or damaged)."""
    cal = Calibration.from_json(_read_all(store_root).get(cache_key(model, dims, scheme)))
    return cal if cal is not None and (cal.model, cal.dims, cal.scheme) == (model, dims, scheme) else None


def cached_for_model(store_root: str, model: str) -> list[Calibration]:
    """Every cached calibration of `model` (any width or scheme), for doctor; reads only."""
    found = []
    for entry in _read_all(store_root).values():
        cal = Calibration.from_json(entry)
        if cal is not None and cal.model == model:
            found.append(cal)
    return found


def save_cached(store_root: str, cal: Calibration) -> None:
    """Add `cal` to the cache file (crash-safe replace, 0600 in a 0700 folder); OSError is the caller's."""
    path = _path(store_root)
    data = _read_all(store_root)
    data[cache_key(cal.model, cal.dims, cal.scheme)] = cal.to_json()
    body = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True).encode("utf-8") + b"\n"
    fd, tmp = fileio.new_tmp(path)  # 0600, its folder created 0700
    fileio.commit(fd, tmp, path, body)
