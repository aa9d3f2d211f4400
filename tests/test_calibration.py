"""The relevance gate's calibration: computed once per model, cached in the store, shown by doctor."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dsh_memory_mcp import config
from dsh_memory_mcp.cli import doctor
from dsh_memory_mcp.config import VectorSettings
from dsh_memory_mcp.search import calibration
from dsh_memory_mcp.search.calibration import PROBES, Calibration, calibrate
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
    assert Calibration.score(0.73, 0.5) == 0.73


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
    assert Calibration.score(floor_other, floor_other) == 0.5
    assert 0.5 < Calibration.score((floor_other + 1) / 2, floor_other) < 1.0


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
