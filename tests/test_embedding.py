"""The embedding client and circuit breaker, against a real HTTP server speaking llama-server's API."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest

from dsh_memory_mcp.errors import EmbeddingUnavailable
from dsh_memory_mcp.search.embedding import CircuitBreaker, EmbeddingClient, _parse_llama
from tests.helpers.clock import FakeClock
from tests.helpers.fake_llama import FakeLlama, embed_text, free_port, not_llama


@pytest.fixture
def fake() -> Iterator[FakeLlama]:
    with FakeLlama() as server:
        yield server


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (math.hypot(*a) * math.hypot(*b))


def test_llama_server_nested_embedding_shape_is_unwrapped(fake: FakeLlama) -> None:
    client = EmbeddingClient(fake.url, api="llama")
    try:
        vectors = client.embed(["the deploy pipeline pushes images", "cats"], timeout=5)
    finally:
        client.close()
    assert [len(v) for v in vectors] == [64, 64]
    assert vectors[0] == pytest.approx(embed_text("the deploy pipeline pushes images"))
    assert fake.count("/embedding") == 1


def test_auto_api_prefers_embedding_and_remembers_it(fake: FakeLlama) -> None:
    client = EmbeddingClient(fake.url)
    try:
        client.embed(["a"], timeout=5)
        client.embed(["b"], timeout=5)
    finally:
        client.close()
    assert client.api == "llama"
    assert fake.count("/embedding") == 2
    assert fake.count("/v1/embeddings") == 0


def test_an_openai_only_server_is_reached_through_v1_embeddings() -> None:
    with FakeLlama(openai_only=True) as fake:
        client = EmbeddingClient(fake.url, model="text-embedding-x")
        try:
            first = client.embed(["container release workflow"], timeout=5)
            client.embed(["again"], timeout=5)
        finally:
            client.close()
        assert client.api == "openai"
        # One 404 on /embedding, then /v1/embeddings for good; the 404 did not count as a failure.
        assert fake.count("/embedding") == 1
        assert fake.count("/v1/embeddings") == 2
        assert client.breaker.failures == 0
        assert first[0] == pytest.approx(embed_text("container release workflow"))


@pytest.mark.parametrize("suffix", ["/v1/embeddings", "/v1"], ids=["full-url", "v1-root"])
def test_an_openai_style_endpoint_url_picks_v1_embeddings(fake: FakeLlama, suffix: str) -> None:
    client = EmbeddingClient(fake.url + suffix)
    try:
        client.embed(["x"], timeout=5)
    finally:
        client.close()
    assert client.base_url == fake.url
    assert fake.count("/v1/embeddings") == 1
    assert fake.count("/embedding") == 0


def test_vectors_come_back_raw_so_the_caller_normalises_them() -> None:
    # llama-cpp-python does not normalise; the channel must not rely on the server doing it.
    with FakeLlama(scale=5.0) as fake:
        client = EmbeddingClient(fake.url)
        try:
            (vec,) = client.embed(["docker images"], timeout=5)
        finally:
            client.close()
    assert math.hypot(*vec) == pytest.approx(5.0)


def test_texts_are_sent_in_batches_in_order(fake: FakeLlama) -> None:
    texts = [f"text number {i} about docker" for i in range(10)]
    client = EmbeddingClient(fake.url, batch_size=4)
    try:
        vectors = client.embed(texts, timeout=5)
    finally:
        client.close()
    assert fake.count("/embedding") == 3
    assert [v == pytest.approx(embed_text(t)) for v, t in zip(vectors, texts, strict=True)] == [True] * 10


def test_an_over_long_input_is_shrunk_and_retried_not_counted_as_a_failure() -> None:
    with FakeLlama(max_tokens=40) as fake:
        long_text = " ".join(f"word{i}" for i in range(300))
        client = EmbeddingClient(fake.url, batch_size=8)
        try:
            vectors = client.embed(["short docker note", long_text], timeout=5)
        finally:
            client.close()
        assert len(vectors) == 2
        assert client.breaker.failures == 0
        # The batch was refused (500 "too large"), then split, then the long one shrunk to fit.
        sent = fake.embedded_texts
        assert "short docker note" in sent
        assert any(t.startswith("word0 word1") and len(t) < len(long_text) for t in sent)


def test_inputs_are_cut_to_max_chars_before_sending(fake: FakeLlama) -> None:
    client = EmbeddingClient(fake.url, max_chars=50)
    try:
        client.embed(["x" * 500], timeout=5)
    finally:
        client.close()
    assert fake.embedded_texts == ["x" * 50]


def test_a_slow_backend_is_abandoned_at_the_deadline() -> None:
    with FakeLlama(delay_s=1.0) as fake:
        client = EmbeddingClient(fake.url)
        try:
            t0 = time.monotonic()
            with pytest.raises(EmbeddingUnavailable):
                client.embed(["slow"], timeout=0.3)
            elapsed = time.monotonic() - t0
        finally:
            client.close()
    assert elapsed < 0.9, elapsed  # the 0.3 s budget, not the backend's 1 s


def test_a_refused_connection_fails_fast() -> None:
    client = EmbeddingClient(f"http://127.0.0.1:{free_port()}")
    try:
        t0 = time.monotonic()
        with pytest.raises(EmbeddingUnavailable):
            client.embed(["x"], timeout=10)
        assert time.monotonic() - t0 < 0.5
    finally:
        client.close()


def test_the_breaker_backs_off_1_2_4_up_to_30_seconds() -> None:
    clock = FakeClock(auto=False)
    breaker = CircuitBreaker(clock=clock.monotonic)
    waits = []
    for _ in range(8):
        assert breaker.allow()
        breaker.record_failure()
        waits.append(breaker.retry_in())
        assert not breaker.allow()
        clock.advance(waits[-1])
    assert waits == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_half_open_breaker_lets_exactly_one_trial_through() -> None:
    clock = FakeClock(auto=False)
    breaker = CircuitBreaker(clock=clock.monotonic)
    breaker.record_failure()
    clock.advance(1.0)
    assert breaker.allow()
    assert not breaker.allow()  # the trial is in flight
    breaker.record_success()
    assert breaker.allow() and breaker.allow()
    assert breaker.failures == 0


def test_a_failing_backend_is_not_hammered_while_the_breaker_is_open() -> None:
    # The product's breaker (1 s, doubling) on a clock that moves only when told to.
    clock = FakeClock(auto=False)
    with FakeLlama(fail_status=500) as fake:
        client = EmbeddingClient(fake.url, clock=clock)
        try:
            for _ in range(30):
                with pytest.raises(EmbeddingUnavailable):
                    client.embed(["q"], timeout=5)
            assert fake.embedding_requests() == 1  # open for 1 s after the first failure
            clock.advance(0.99)
            with pytest.raises(EmbeddingUnavailable):
                client.embed(["q"], timeout=5)
            assert fake.embedding_requests() == 1  # still open
            clock.advance(0.01)
            for _ in range(30):
                with pytest.raises(EmbeddingUnavailable):
                    client.embed(["q"], timeout=5)
            assert fake.embedding_requests() == 2  # one half-open trial, which failed: now 2 s
            assert client.breaker.retry_in() == pytest.approx(2.0)
            fake.fail_status = None
            clock.advance(2.0)
            client.embed(["q"], timeout=5)
            assert client.breaker.failures == 0
            assert fake.embedding_requests() == 3
        finally:
            client.close()


def test_health_reports_loading_then_ready(fake: FakeLlama) -> None:
    # The model "loads" until the test says it is done: no time window a busy machine can miss.
    fake.loading_s = 3600.0
    fake._started = time.monotonic()
    client = EmbeddingClient(fake.url)
    try:
        assert client.health() == "loading"
        assert client.health() == "loading"
        fake.loading_s = 0.0
        assert client.health() == "ready"
    finally:
        client.close()


def test_health_tells_down_from_a_foreign_process() -> None:
    with not_llama() as port:
        client = EmbeddingClient(f"http://127.0.0.1:{port}")
        down = EmbeddingClient(f"http://127.0.0.1:{free_port()}")
        try:
            assert client.health() == "foreign"
            assert down.health() == "down"
        finally:
            client.close()
            down.close()


def test_model_info_reads_the_model_file_and_width(fake: FakeLlama) -> None:
    fake.model_path = "/models/all-MiniLM-L6-v2-Q8_0.gguf"
    fake.dims = 384
    client = EmbeddingClient(fake.url)
    try:
        info = client.model_info()
    finally:
        client.close()
    assert (info.model_id, info.dims) == ("all-minilm-l6-v2", 384)


def test_per_token_vectors_are_mean_pooled_and_old_flat_replies_accepted() -> None:
    # `--pooling none` gives one vector per token; an old llama-server gives a flat object.
    assert _parse_llama([{"index": 0, "embedding": [[1.0, 0.0], [0.0, 1.0]]}], 1) == [[0.5, 0.5]]
    assert _parse_llama({"embedding": [0.1, 0.2]}, 1) == [[0.1, 0.2]]
    with pytest.raises(EmbeddingUnavailable):
        _parse_llama([{"index": 0, "embedding": [[1.0, float("nan")]]}], 1)
    with pytest.raises(EmbeddingUnavailable):
        _parse_llama([], 1)
