"""The vector channel's backend supervisor: reach a ready embedding backend and keep track of it.

It owns the HTTP client and, for a local llama-server, the lifecycle manager; it learns the
model's id and width (the sidecar header), notices a width change (a swapped model), and turns
failures into a status line and one WARNING per new reason. Everything that may block runs on the
channel's worker thread, except a search's query embedding. It never touches sidecars or records.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh_memory_mcp.config import VectorSettings
from dsh_memory_mcp.errors import EmbeddingUnavailable
from dsh_memory_mcp.store.clock import SYSTEM, Clock
from dsh_memory_mcp.texts import msg

if TYPE_CHECKING:
    from dsh_memory_mcp.search.calibration import Calibration
    from dsh_memory_mcp.search.embedding import EmbeddingClient, LlamaServerManager, ModelInfo, Role
    from dsh_memory_mcp.search.sidecar import Header
    from dsh_memory_mcp.store.shared import SharedStore

#: Seconds a search may spend on its query embedding before answering lexically (docs/design.md: Embedding backend).
QUERY_BUDGET = 0.3
#: Seconds for one embedding request on the write/backfill path (whole records on a CPU).
WRITE_BUDGET = 10.0


class Backend:
    """One embedding backend (spawned/reused llama-server, or an endpoint) and what it produces.

    :param on_new_space: called when vectors of a new space can be produced (ready, or the width
        changed): every scope then needs checking for vectors of the current header.
    """

    def __init__(
        self,
        settings: VectorSettings,
        *,
        store: SharedStore,
        log: logging.Logger,
        stop: threading.Event,
        wake: threading.Event,
        on_new_space: Callable[[], None],
        load_timeout: float = 120.0,
        persist_calibration: bool = True,
        clock: Clock = SYSTEM,
    ) -> None:
        self.settings = settings
        #: What the embedding client's deadlines and breaker and the bring-up waits are measured on.
        self.clock = clock
        #: Save a computed calibration in the store (False: read-only callers keep it in memory).
        self.persist_calibration = persist_calibration
        self.store = store
        self.log = log
        self.stop = stop
        self.wake = wake
        self.ready = threading.Event()
        #: Set from start until the first bring-up has either found a backend or given up (or
        #: decided to spawn one): a search arriving meanwhile waits for it within its budget.
        self.probing = threading.Event()
        #: The model's relevance gate (`search.calibration`), known once ready.
        self.calibration: Calibration | None = None
        self._info: ModelInfo | None = None
        self.load_timeout = load_timeout
        self.on_new_space = on_new_space
        self.client: EmbeddingClient | None = None
        self.manager: LlamaServerManager | None = None
        self.model_id = settings.model_id
        self.dims: int | None = None
        self.status = msg("向量检索:关闭(DSH_MEMORY_VECTOR=off)") if not settings.enabled else msg("向量检索:尚未启动")
        if settings.enabled and not settings.usable:
            self.status = msg("向量检索:不可用({unavailable_reason})", unavailable_reason=settings.unavailable_reason)
        self.failed_bringups = 0
        self.last_problem: str | None = None
        self.check_requested = False
        self._lock = threading.Lock()

    # -- state -----------------------------------------------------------------------------

    def header(self) -> Header | None:
        """The sidecar header vectors are written and read under: model id (+ input scheme) and width."""
        dims = self.dims
        if dims is None:
            return None
        suffix = self.client.scheme.header_suffix if self.client is not None else ""
        return (self.model_id + suffix, dims)

    @property
    def spawned_pid(self) -> int | None:
        return self.manager.pid if self.manager is not None else None

    def status_line(self) -> str:
        status = self.status
        client = self.client
        if self.ready.is_set() and client is not None and client.breaker.failures:
            status = msg(
                "{status};熔断中(连续失败 {failures} 次,{secs} s 后重试)",
                status=status,
                failures=client.breaker.failures,
                secs=f"{client.breaker.retry_in():.1f}",
            )
        return status

    def note_dims(self, dims: int) -> bool:
        """Whether `dims` is the width we expect; a change (the model was swapped) re-heads everything."""
        if dims == self.dims:
            return True
        with self._lock:
            changed = dims != self.dims
            if changed:
                self.log.warning("vector: 嵌入维度从 %s 变为 %s,所有向量文件将按新维度重建", self.dims, dims)
                self.dims = dims
                self.calibration = None  # another model: the worker calibrates it (seed rule meanwhile)
                self.status = msg(
                    "向量检索:就绪 model={model_id} dims={dims}(维度刚变更,正在重建)", model_id=self.model_id, dims=dims
                )
        if changed:
            self.on_new_space()
        return False

    # -- bring-up --------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the HTTP client (and the llama-server manager); importing httpx costs ~0.1 s."""
        from dsh_memory_mcp.search.embedding import LOG_FILE_NAME, EmbeddingClient, LlamaServerManager

        if self.client is not None:
            return
        settings = self.settings
        if settings.endpoint:
            # OpenAI-style servers need a "model"; DSH_MEMORY_EMBED_MODEL names it, else /v1/models.
            self.client = EmbeddingClient(
                settings.endpoint, model=settings.model_id if settings.model else None, clock=self.clock
            )
        else:
            self.manager = LlamaServerManager(
                settings,
                log_path=os.path.join(self.store.root, LOG_FILE_NAME),
                load_timeout=self.load_timeout,
                spawn_lock_path=os.path.join(self.store.root, ".vectors", f"llama-server-{settings.port}.lock"),
                clock=self.clock,
            )
            self.client = EmbeddingClient(
                self.manager.base_url, api="openai" if settings.bundled else "auto", clock=self.clock
            )

    def bring_up(self) -> bool:
        """Reach a ready backend, learn its model and width; False (logged) when it cannot."""
        assert self.client is not None
        client = self.client
        try:
            if self.manager is not None:
                self.status = (
                    msg("向量检索:正在连接/启动内置嵌入模型")
                    if self.settings.bundled
                    else msg("向量检索:正在连接/启动 llama-server")
                )
                origin = self.manager.ensure(self.stop, on_spawn=self.probing.clear)
            else:
                origin = "endpoint"
                self._wait_endpoint(client)
            info = client.model_info()
            model_id = self._pick_model_id(origin, info.model_id)
            if origin == "endpoint" and client.model is None and info.name:
                client.model = info.name
            from dsh_memory_mcp.search.embedding import input_scheme

            client.scheme = input_scheme(info)
            client.breaker.record_success()  # a fresh backend gets a clean slate
            probe = client.embed(["dimension probe"], timeout=WRITE_BUDGET)
            self._info = info
            self.calibration = self._calibration(model_id, len(probe[0]), info)
        except EmbeddingUnavailable as exc:
            self.failed_bringups += 1
            self.problem(str(exc))
            self.probing.clear()
            return False
        self.model_id = model_id
        self.dims = len(probe[0])
        self.failed_bringups = 0
        self.last_problem = None
        where = client.base_url
        how = {
            "spawned": msg("本进程启动 pid={spawned_pid}", spawned_pid=self.spawned_pid),
            "reused": msg("复用已运行的服务"),
            "endpoint": msg("外部端点"),
        }
        self.status = msg(
            "向量检索:就绪 model={model_id} dims={dims} {where}({value})",
            model_id=self.model_id,
            dims=self.dims,
            where=where,
            value=how.get(origin, origin),
        )
        if origin == "reused":
            self.log.info("vector: 复用已在运行的 llama-server %s(不归本进程管理,退出时不会停止它)", where)
        self.log.info("vector: 向量后端就绪 model=%s dims=%s %s", self.model_id, self.dims, where)
        self.ready.set()
        self.probing.clear()
        self.on_new_space()
        return True

    def recalibrate(self) -> bool:
        """Calibrate the current model again (its width changed); False if nothing to do.

        A failed attempt is left to the breaker's pacing (the worker waits it out, then tries again).
        """
        if self._info is None or self.dims is None:
            return False
        try:
            self.calibration = self._calibration(self.model_id, self.dims, self._info)
        except EmbeddingUnavailable as exc:
            self.embedding_failed(exc)
        return True

    def _calibration(self, model_id: str, dims: int, info: ModelInfo) -> Calibration:
        """This model's relevance gate: from the store's cache, else embed the probes once and cache it."""
        from dsh_memory_mcp.search import calibration, sidecar

        assert self.client is not None
        scheme = self.client.scheme
        cal = calibration.load_cached(self.store.root, model_id, dims, scheme.name)
        if cal is not None:
            return cal
        t0 = time.monotonic()
        probes = list(calibration.PROBES)

        def embedded(role: Role) -> list[list[float]]:
            assert self.client is not None
            out: list[list[float]] = []
            for start in range(0, len(probes), 8):  # small requests: a slow CPU gets WRITE_BUDGET for each
                out.extend(self.client.embed(probes[start : start + 8], timeout=WRITE_BUDGET, role=role))
            if {len(v) for v in out} != {dims}:
                raise EmbeddingUnavailable(msg("校准探针的嵌入维度与模型不一致"))
            return out

        # The probes as memories (the per-query null), and as questions when those are marked otherwise.
        records = sidecar.l2_normalise(embedded("record"))
        queries = sidecar.l2_normalise(embedded("query")) if scheme.asymmetric else None
        cal = calibration.calibrate(records, model=model_id, scheme=scheme.name, query_vectors=queries)
        try:
            if self.persist_calibration:
                calibration.save_cached(self.store.root, cal)
        except OSError as exc:
            self.log.warning("vector: 无法保存模型校准结果(%s),下次启动会重新校准", exc)
        self.log.info("vector: 模型 %s 已校准(%.1f s):%s", model_id, time.monotonic() - t0, ";".join(cal.lines()))
        return cal

    def _wait_endpoint(self, client: EmbeddingClient) -> None:
        deadline = self.clock.monotonic() + self.load_timeout
        while True:
            health = client.health(timeout=2.0)
            if health == "down":
                raise EmbeddingUnavailable(
                    msg("无法连接嵌入服务 {endpoint}(DSH_MEMORY_EMBED_ENDPOINT)", endpoint=self.settings.endpoint)
                )
            if health != "loading":
                return  # ready, or a server without llama-server's /health (OpenAI-compatible)
            if self.clock.monotonic() > deadline or self.clock.wait(self.stop, 0.2):
                raise EmbeddingUnavailable(msg("嵌入服务 {endpoint} 一直在加载模型", endpoint=self.settings.endpoint))

    def _pick_model_id(self, origin: str, served: str | None) -> str:
        """The id for sidecar headers: the model that actually produces the vectors (a reused
        server's own model wins over ours, with a warning, so two spaces never mix in one file)."""
        configured = self.settings.model_id
        if origin == "spawned" or not served or served == configured:
            return configured
        if origin == "endpoint":
            # An explicit DSH_MEMORY_EMBED_MODEL names the endpoint's model; else trust the server.
            return configured if self.settings.model else served
        self.log.warning(
            "vector: 端口 %s 上已在运行的 llama-server 加载的是 %s,不是配置的 %s;向量按 %s 记录",
            self.settings.port,
            served,
            configured,
            served,
        )
        return served

    def problem(self, reason: str) -> None:
        self.status = msg("向量检索:不可用({reason}),已退化为纯词法检索", reason=reason)
        if reason != self.last_problem:
            self.log.warning("vector: 向量后端不可用(%s),退化为纯词法检索", reason)
            self.last_problem = reason

    def alive(self) -> bool:
        """After a failed request: is the backend still there? If not, bring one up on the next turn."""
        assert self.client is not None
        if self.manager is None:
            return True  # an endpoint: the breaker paces the retries
        if self.manager.owned or self.client.health() != "down":
            return True
        self.log.warning("vector: llama-server %s 已不在运行,将重新连接或启动", self.manager.base_url)
        self.ready.clear()
        self.manager.stop()  # reap our child if it was ours and died
        return False

    def embedding_failed(self, exc: EmbeddingUnavailable) -> None:
        """A request failed: have the worker check whether a local backend is gone (not when the
        breaker refused to send one: that would make a health probe of every search)."""
        from dsh_memory_mcp.search.embedding import BreakerOpen

        if isinstance(exc, BreakerOpen):
            return
        self.log.debug("vector: 嵌入失败:%s", exc)
        if self.manager is not None and not self.check_requested:
            self.check_requested = True
            self.wake.set()

    # -- embedding -------------------------------------------------------------------------

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors for records (write budget); a width change raises after re-heading everything."""
        assert self.client is not None
        vectors = self.client.embed(texts, timeout=WRITE_BUDGET, role="record")
        if not self.note_dims(len(vectors[0])):
            raise EmbeddingUnavailable(msg("嵌入维度变了,按新维度重建"))
        return vectors

    def embed_with_retries(self, texts: list[str]) -> list[list[float]]:
        """`embed`, tried 3 times while the breaker allows (the human `reembed`)."""
        assert self.client is not None
        for attempt in range(1, 4):
            try:
                return self.embed(texts)
            except EmbeddingUnavailable:
                if attempt == 3 or self.stop.is_set():
                    raise
                self.clock.wait(self.stop, max(0.05, self.client.breaker.retry_in()))
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        if self.manager is not None:
            self.manager.stop()
            self.manager.close()
        if self.client is not None:
            self.client.close()
        self.ready.clear()
