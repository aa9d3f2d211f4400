"""The relevance gate's calibration: computed once per model, cached in the store, shown by doctor."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dsh_memory_mcp import config
from dsh_memory_mcp.cli import doctor
from dsh_memory_mcp.config import VectorSettings
from dsh_memory_mcp.search import calibration
from dsh_memory_mcp.search.calibration import PROBES, calibrate
from dsh_memory_mcp.search.vectors import VectorChannel
from dsh_memory_mcp.store.shared import SharedStore
from tests.helpers.fake_llama import FakeLlama


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_a_model_whose_unrelated_texts_sit_near_zero_keeps_the_seed_rule_and_its_scores() -> None:
    rng = np.random.default_rng(7)
    cal = calibrate(_unit(rng.standard_normal((len(PROBES), 256))), model="m", scheme="plain")
    assert cal.seed_rule
    q = _unit(rng.standard_normal((1, 256)))[0]
    assert cal.floors(q, query_cjk=False) == (0.5, 0.5) and cal.floors(q, query_cjk=True) == (0.5, 0.5)
    # The margin over the seed's gate: 0 at cosine 0.5, 1 at cosine 1.
    assert calibration.margins(np.array([0.5, 0.73, 1.0]), 0.5).tolist() == pytest.approx([0.0, 0.46, 1.0])


def test_a_model_that_puts_everything_near_0_8_needs_a_match_to_beat_the_query_s_own_probe_null() -> None:
    rng = np.random.default_rng(8)
    shared = rng.standard_normal(64)
    probes = _unit(shared * 2.0 + rng.standard_normal((len(PROBES), 64)))  # a common direction: cosines ~0.8
    cal = calibrate(probes, model="e5ish", scheme="plain")
    assert not cal.seed_rule and all(0.6 < c.background < 0.95 for c in cal.cells.values())
    q = _unit((shared * 2.0 + rng.standard_normal(64))[None, :])[0]
    null = float((probes @ q)[12:].max())  # the English probes (the second half)
    _floor_cjk, floor_other = cal.floors(q, query_cjk=False)
    assert floor_other > null and floor_other > 0.5
    assert calibration.margins(np.array([floor_other]), floor_other)[0] == 0.0
    assert calibration.margins(np.array([(floor_other + 1) / 2]), floor_other)[0] == pytest.approx(0.5)
    # Every probe's margin is part of the query's background; the English ones sit below their gate.
    probe_margins = cal.probe_margins(q, *cal.floors(q, query_cjk=False))
    assert probe_margins.shape == (len(PROBES),) and (probe_margins[12:] < 0).all()


def _background(rng: np.random.Generator, centre: float, n: int = 200) -> np.ndarray:
    return rng.normal(centre, 0.1, n)


def test_the_same_margin_counts_for_more_where_the_query_s_background_sits_far_below_the_gate() -> None:
    # A margin of 0.05 over the gate: in a store of memories far from the question (background
    # around -0.4) it stands out; among chatty turns that all sit near the gate (around -0.05) it
    # is one of many. The margin alone cannot tell the two apart; the background can.
    rng = np.random.default_rng(3)
    found = [(0.05, "candidate"), (0.10, "best")]
    far = calibration.relevance_scores(found, _background(rng, -0.4), limit=30)
    near = calibration.relevance_scores(found, _background(rng, -0.05), limit=30)
    assert far["candidate"] > 0.85 and near["candidate"] < 0.55
    assert all(0.5 <= v <= 1.0 for v in (*far.values(), *near.values()))


def test_the_query_s_best_candidate_counts_for_more_than_the_next_one_at_almost_the_same_margin() -> None:
    rng = np.random.default_rng(4)
    background = _background(rng, -0.1)  # both about 2 spreads above it: neither is a sure thing
    scores = calibration.relevance_scores([(0.101, "best"), (0.100, "second")], background, limit=30)
    chance = {rid: (v - 0.5) / 0.5 for rid, v in scores.items()}
    assert chance["best"] > 2 * chance["second"]


def test_relevance_scores_keep_the_best_candidates_each_id_once() -> None:
    rng = np.random.default_rng(5)
    found = [(0.01 * i, f"r{i}") for i in range(40)] + [(0.005, "r39")]  # r39 also in another scope, lower
    scores = calibration.relevance_scores(found, _background(rng, -0.3), limit=30)
    assert set(scores) == {f"r{i}" for i in range(10, 40)}
    assert max(scores, key=scores.__getitem__) == "r39"
    assert calibration.relevance_scores([], _background(rng, -0.3), limit=30) == {}


def test_the_calibration_is_computed_once_per_model_and_read_back_on_the_next_start(store: SharedStore) -> None:
    with FakeLlama() as fake:
        for _ in range(2):
            ch = VectorChannel(VectorSettings(endpoint=fake.url), store)
            ch.start()
            assert ch.wait_ready(10), ch.status
            ch.close()
        assert sum(1 for t in fake.embedded_texts if t == PROBES[0]) == 1
    path = Path(store.root) / ".vectors" / "calibration.json"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    data = json.loads(path.read_text(encoding="utf-8"))
    (entry,) = data.values()
    assert entry["model"] == "fake-embed" and entry["dims"] == 64


def test_a_damaged_calibration_file_is_recomputed_not_trusted(store: SharedStore) -> None:
    path = Path(store.root) / ".vectors" / "calibration.json"
    path.parent.mkdir(mode=0o700)
    path.write_text('{"fake-embed\\t64\\tplain": {"version": 2, "probes": "!!"}}', encoding="utf-8")
    assert calibration.load_cached(store.root, "fake-embed", 64, "plain") is None
    with FakeLlama() as fake:
        ch = VectorChannel(VectorSettings(endpoint=fake.url), store)
        ch.start()
        try:
            assert ch.wait_ready(10), ch.status
            assert ch.stats()["calibration"]
        finally:
            ch.close()
    assert calibration.load_cached(store.root, "fake-embed", 64, "plain") is not None


def test_doctor_shows_the_model_s_background_and_gate(store: SharedStore, tmp_path: Path) -> None:
    with FakeLlama() as fake:
        ch = VectorChannel(VectorSettings(endpoint=fake.url), store)
        ch.start()
        assert ch.wait_ready(10), ch.status
        ch.close()
        env = {"DSH_MEMORY_EMBED_ENDPOINT": fake.url, "HOME": str(tmp_path)}
        settings = config.resolve_settings(store_dir=store.root, env=env, cwd=str(tmp_path))
        checks = [c for c in doctor.run_checks(settings, env=env) if c.title == "相关性门限"]
    text = "\n".join(c.detail for c in checks)
    assert "fake-embed" in text and "背景相似度" in text and "en-en" in text and "zh-zh" in text
