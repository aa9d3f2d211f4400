"""The vector channel under stress that is not an outage: slow moments, worker faults, odd servers,
many scopes, and instances starting together (issues 9, 10, 11, 14)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.config import VectorSettings
from dsh_memory_mcp.search import queries, sidecar
from dsh_memory_mcp.search.embedding import EmbeddingClient
from dsh_memory_mcp.search.vectors import QUERY_BUDGET, VectorChannel
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import subprocess_env
from tests.helpers.fake_llama import FakeLlama, embed_text, free_port
from tests.helpers.fake_llama_exe import kill_quietly, make_stand_in, pid_alive, read_spawns, wait_gone

QUERY = "container release workflow"
TARGET = "the deploy pipeline pushes images"


def _ready_channel(store: SharedStore, fake: FakeLlama, **kw: object) -> VectorChannel:
    ch = VectorChannel(VectorSettings(endpoint=fake.url), store, **kw)  # type: ignore[arg-type]
    store.on_delete = ch.on_delete
    ch.start()
    assert ch.wait_ready(10), ch.status
    return ch


def _settled(ch: VectorChannel, timeout: float = 10.0) -> None:
    """Poll until no query embedding is in flight (they finish on their own threads)."""
    deadline = time.monotonic() + timeout
    while ch.stats()["query_embeddings"]["in_flight"]:
        assert time.monotonic() < deadline, ch.stats()
        time.sleep(0.02)


def test_a_query_that_overran_its_budget_once_does_not_stop_the_next_from_using_vectors(store: SharedStore) -> None:
    with FakeLlama() as fake:
        ch = _ready_channel(store, fake)
        try:
            rid = store.save("global", TARGET).record.id
            ch.record_saved("global", store.snapshot("global").records[0])
            assert ch.wait_idle(5)
            snaps = [store.snapshot("global")]
            fake.delay_s = 0.8  # a cold model or a busy machine, once
            t0 = time.monotonic()
            assert ch.query_scores(QUERY, snaps) == {}
            assert time.monotonic() - t0 < QUERY_BUDGET + 0.25
            fake.delay_s = 0.0
            _settled(ch)  # the overrun request finished in the background
            assert list(ch.query_scores(QUERY, snaps)) == [rid]  # its vector, kept
            assert list(ch.query_scores("container release workflows", snaps)) == [rid]  # a new request
            assert ch.stats()["breaker_failures"] == 0
        finally:
            ch.close()


def test_a_backend_that_is_only_slow_is_not_treated_as_failing_and_the_budget_follows_it(store: SharedStore) -> None:
    with FakeLlama() as fake:
        ch = _ready_channel(store, fake)
        try:
            rid = store.save("global", TARGET).record.id
            ch.record_saved("global", store.snapshot("global").records[0])
            assert ch.wait_idle(5)
            snaps = [store.snapshot("global")]
            fake.delay_s = 0.6
            assert ch.search(QUERY, snaps).state == "skipped"  # over the 300 ms it starts with
            _settled(ch)
            for i in range(3):  # the budget is now 1.5 × the 0.6 s the backend takes
                answer = ch.search(f"{QUERY} {i}", snaps)
                assert answer.state == "used" and rid in answer.scores, answer
            assert ch.stats()["breaker_failures"] == 0 and ch.stats()["query_budget_ms"] >= 600
        finally:
            fake.delay_s = 0.0
            ch.close()


def test_a_backend_that_keeps_overrunning_is_treated_as_failing_after_three_in_a_row(
    store: SharedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queries, "LET_FINISH", 0.5)  # requests themselves give up after 0.5 s
    with FakeLlama() as fake:
        ch = _ready_channel(store, fake)
        try:
            snaps = [store.snapshot("global")]
            fake.delay_s = 2.0
            for i in range(3):
                assert ch.query_scores(f"{QUERY} {i}", snaps) == {}
                _settled(ch)
            sent = fake.embedding_requests()
            t0 = time.monotonic()
            answer = ch.search(f"{QUERY} 4", snaps)  # the breaker is open now: no request, no wait
            _settled(ch)
            assert answer.state == "skipped" and "熔断" in (answer.reason or ""), answer
            assert time.monotonic() - t0 < 0.2
            assert fake.embedding_requests() == sent
            assert ch.stats()["breaker_failures"] == 1
        finally:
            fake.delay_s = 0.0
            ch.close()


def test_the_vector_worker_restarts_after_an_exception_and_says_so_once_at_warning(
    store: SharedStore, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeLlama() as fake:
        ch = _ready_channel(store, fake)
        try:
            real_step = ch._writes.step
            calls = {"n": 0}

            def step_that_fails_twice() -> bool:  # an unexpected bug in the write path, twice
                calls["n"] += 1
                if calls["n"] <= 2:
                    raise RuntimeError("injected worker fault")
                return real_step()

            ch._writes.step = step_that_fails_twice  # type: ignore[method-assign]
            with caplog.at_level(logging.DEBUG, logger="dsh_memory_mcp.search.vectors"):
                rid = store.save("global", TARGET).record.id
                ch.record_saved("global", store.snapshot("global").records[0])
                # 1 s then 2 s of backoff (the breaker's schedule), then the save is embedded.
                deadline = time.monotonic() + 10
                while calls["n"] < 3 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert ch.wait_idle(10), ch.status
            # Recall, not speed (the budget is tested above): a loaded machine may take over 300 ms.
            assert list(ch.query_scores(QUERY, [store.snapshot("global")], budget=10.0)) == [rid]
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "后台线程出错" in r.getMessage()]
            assert len(warnings) == 1 and "injected worker fault" in warnings[0].getMessage()
            assert ch.stats()["restarts"] == 2 and ch.ready
        finally:
            ch.close()


def test_an_openai_server_that_404s_the_probe_without_reading_it_does_not_garble_the_next_request() -> None:
    with FakeLlama(openai_only=True, unread_404=True) as fake:
        client = EmbeddingClient(fake.url)
        try:
            for _ in range(3):
                assert len(client.embed(["cats are nice", "a much longer second text " * 20], timeout=5)[0]) == 64
            assert client.api == "openai" and client.breaker.failures == 0
        finally:
            client.close()


def test_a_search_right_after_start_waits_for_the_backend_being_probed(store: SharedStore) -> None:
    with FakeLlama() as fake:
        rid = store.save("global", TARGET).record.id
        sidecar.write(store.layout.vec_path("global"), ("fake-embed", 64), [(rid, embed_text(TARGET))])
        _ready_channel(store, fake).close()  # this model is calibrated once per store; the next start reads it
        before = fake.embedding_requests()
        ch = VectorChannel(VectorSettings(endpoint=fake.url), store)
        try:
            ch.start()
            # Within ~0 ms of start. The wait is bounded by the search's budget: 300 ms in service; a
            # larger one here so that a loaded CI machine cannot turn "waited for the probe" into a miss
            # (before the fix such a search returned {} at once, whatever its budget).
            t0 = time.monotonic()
            scores = ch.query_scores(QUERY, [store.snapshot("global")], budget=3.0)
            assert time.monotonic() - t0 < 3.0
            assert list(scores) == [rid]
            assert fake.embedding_requests() >= before + 2  # the dimension probe, then this query
        finally:
            ch.close()


def test_a_long_lived_process_keeps_a_bounded_number_of_scope_matrices(store: SharedStore) -> None:
    with FakeLlama() as fake:
        ch = _ready_channel(store, fake)
        try:
            ch._cache.max_scopes = 2
            scopes = ["global", "custom:a", "custom:b", "custom:c"]
            ids = {}
            for scope in scopes:
                ids[scope] = store.save(scope, f"{TARGET} {scope}").record.id
                ch.record_saved(scope, store.snapshot(scope).records[0])
            assert ch.wait_idle(10)
            for _ in range(2):
                for scope in scopes:
                    assert list(ch.query_scores(QUERY, [store.snapshot(scope)])) == [ids[scope]]
                    assert len(ch.stats()["rows"]) <= 2
            assert ch.stats()["cache_evictions"] >= 6
        finally:
            ch.close()


_STARTER = textwrap.dedent(
    """
    import json, sys, time
    from dsh_memory_mcp.config import VectorSettings
    from dsh_memory_mcp.search.embedding import LlamaServerManager
    cfg = json.loads(sys.argv[1])
    m = LlamaServerManager(VectorSettings(**cfg["settings"]), log_path=cfg["log"], load_timeout=20,
                           spawn_lock_path=cfg["lock"])
    while time.time() < cfg["at"]:
        time.sleep(0.001)
    print(m.ensure(), m.pid, flush=True)
    sys.stdin.readline()  # the spawning thread must outlive its child (PR_SET_PDEATHSIG)
    m.close()
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in executable is a POSIX shell script")
def test_two_processes_starting_together_spawn_one_llama_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv_file = tmp_path / "spawns.jsonl"
    monkeypatch.setenv("FAKE_LLAMA_ARGV_FILE", str(argv_file))
    monkeypatch.setenv("FAKE_LLAMA_LOADING_S", "0.5")
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    settings = {"exe": str(make_stand_in(tmp_path / "bin")), "model": str(model), "port": free_port(), "threads": 1}
    cfg = {
        "settings": settings,
        "log": str(tmp_path / "l.log"),
        "lock": str(tmp_path / "store" / ".vectors" / f"llama-server-{settings['port']}.lock"),
        "at": time.time() + 1.5,
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _STARTER, json.dumps(cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=subprocess_env(),
            text=True,
            encoding="utf-8",
        )
        for _ in range(2)
    ]
    try:
        answers = sorted(p.stdout.readline().split()[0] for p in procs if p.stdout is not None)
        assert answers == ["reused", "spawned"]
        assert len(read_spawns(argv_file)) == 1  # the second waited on the lock, then found it ready
        assert (Path(cfg["lock"]).stat().st_mode & 0o777) == 0o600
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            if p.stdout is not None:
                p.stdout.close()
        for spawn in read_spawns(argv_file):
            if not wait_gone(spawn["pid"], 5):
                kill_quietly(spawn["pid"] if pid_alive(spawn["pid"]) else None)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_place_of_a_sidecar_is_not_re_embedded_in_a_loop(store: SharedStore) -> None:
    vec = Path(store.scope_path("global")[: -len(".jsonl")] + ".vec")
    with FakeLlama() as fake:
        ch = _ready_channel(store, fake)
        try:
            assert ch.wait_idle(5)  # whatever start-up still sends (calibration, backfill) is counted before
            asked = fake.embedding_requests()
            os.mkfifo(vec, 0o600)
            store.save("global", TARGET)
            ch.record_saved("global", store.snapshot("global").records[0])
            # Idle means no save waiting and no scope left to backfill: a scope marked dirty again
            # after every failed write never gets there (the loop this guards against).
            assert ch.wait_idle(5)
            # The unusable file cost the one embedding of the save, and no backfill after it.
            assert fake.embedding_requests() - asked == 1
        finally:
            ch.close()
