"""`VectorChannel`: the optional semantic half of hybrid search, as one facade (docs/design.md:
Search, Embedding backend).

It answers which records pass the model's relevance gate and how likely each is to be relevant
(`search.calibration`), and keeps the `.vec` sidecars filled (`search.backend`, `matrices`,
`writes`, `backfill`). Off or unconfigured, every method is a no-op and numpy and httpx are not
imported; not ready, a search gets ``{}`` at once; slow, it answers lexically after its budget.
Read-only (the human read commands) writes nothing under the store. All network and spawn work
runs on one long-lived worker thread: PR_SET_PDEATHSIG fires when the *spawning thread* exits.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp.config import VectorSettings
from dsh_memory_mcp.errors import EmbeddingUnavailable
from dsh_memory_mcp.search.backend import QUERY_BUDGET, Backend
from dsh_memory_mcp.search.backfill import Backfill
from dsh_memory_mcp.search.matrices import MatrixCache
from dsh_memory_mcp.search.queries import PendingQuery, QueryEmbedder
from dsh_memory_mcp.search.writes import SAVE_BATCH, SidecarWriter, WriteQueue
from dsh_memory_mcp.store.clock import SYSTEM, Clock
from dsh_memory_mcp.store.records import Record, now_ms
from dsh_memory_mcp.store.redact import Once
from dsh_memory_mcp.texts import msg

if TYPE_CHECKING:
    from dsh_memory_mcp.store.shared import ScopeSnapshot, SharedStore

logger = logging.getLogger("dsh_memory_mcp.search.vectors")

#: At most this many vector candidates go to the ranking (docs/design.md: Search).
MAX_CANDIDATES = 30
#: Idle worker rescans every scope this often, to pick up records other writers left unembedded.
RESCAN_INTERVAL = 60.0
#: `close_pairs` compares this many rows with all at once (a bounded block of cosines).
PAIR_ROWS = 256

ENABLE_HINT = msg(
    "启用方法:把 DSH_MEMORY_EMBED_MODEL 设为一个 .gguf 嵌入模型文件(并让 llama-server 在 PATH 上,或用 "
    "DSH_MEMORY_EMBED_EXE 指定它的路径),或把 DSH_MEMORY_EMBED_ENDPOINT 设为已在运行的嵌入服务地址;设 "
    "DSH_MEMORY_VECTOR=off 可关闭向量检索并不再显示本提示"
)


@dataclass(frozen=True)
class VectorAnswer:
    """The vector half of one search: its scores, and whether it took part (``used``/``skipped``/``off``)."""

    scores: dict[str, float]
    state: str
    #: Why it was skipped (Chinese, for the caller), when it was.
    reason: str | None = None


@dataclass(frozen=True)
class PendingSearch:
    """A search's vector half under way (`VectorChannel.start_query`): `finish(snapshots)` waits for
    the query vector within what is left of the budget and scores `snapshots`."""

    finish: Callable[[Sequence[ScopeSnapshot]], VectorAnswer]

    @staticmethod
    def answered(answer: VectorAnswer) -> PendingSearch:
        return PendingSearch(lambda _snapshots: answer)


class VectorChannel:
    """Vector recall for search, embed-on-save, delete and backfill of the `.vec` sidecars.

    :param settings: resolved `VectorSettings`; when off or unusable, every method is a no-op.
    :param store: the `SharedStore` whose scopes get sidecars; pass it `on_delete` as
        ``SharedStore(on_delete=channel.on_delete)`` (or a forwarder).
    :param load_timeout: seconds to wait for a spawned llama-server to load its model.
    :param read_only: write nothing under the store (see the module docstring).
    :param clock: what the embedding client (deadlines, breaker) and the bring-up run on.
    """

    def __init__(
        self,
        settings: VectorSettings,
        store: SharedStore,
        *,
        load_timeout: float = 120.0,
        read_only: bool = False,
        clock: Clock = SYSTEM,
    ) -> None:
        self.settings = settings
        self.store = store
        self.read_only = read_only
        self._log = logger
        self._active = settings.usable
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._thread: threading.Thread | None = None
        self._backend = Backend(
            settings,
            store=store,
            log=self._log,
            stop=self._stop,
            wake=self._wake,
            on_new_space=lambda: self._backfill.mark_all(),
            load_timeout=load_timeout,
            persist_calibration=not read_only,
            clock=clock,
        )
        self._cache = MatrixCache(lambda scope: store.layout.vec_path(scope))
        self._backfill = Backfill(self._backend, self._cache, store, self._log, on_dirty=self._work_arrived)
        self._writer = SidecarWriter(self._backend, store, self._log, mark_dirty=self._backfill.mark)
        self._backfill.writer = self._writer
        self._writes = WriteQueue(self._backend, self._cache, self._writer, self._log)
        #: Last query time in ms, for status and tests.
        self.last_query_ms: float | None = None
        self._queries = QueryEmbedder(self._embed_query, self._backend.embedding_failed, QUERY_BUDGET)
        #: Searches whose vector half was skipped, by kind of reason (stats, tests).
        self.skips: dict[str, int] = {}
        self._skip_warned = Once()
        #: Worker restarts after an unexpected error, since start.
        self.restarts = 0
        self._seen_errors = Once(limit=100)

    def _embed_query(self, query: str, timeout: float) -> list[float]:
        client = self._backend.client
        if client is None:
            raise EmbeddingUnavailable(msg("向量后端尚未就绪"))
        return client.embed([query], timeout=timeout, slow_is_failure=False, role="query")[0]

    def _work_arrived(self) -> None:
        self._idle.clear()
        self._wake.set()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Return at once; bring the backend up and backfill on the worker thread.

        When vectors are enabled but unconfigured, log the one line that says how to enable them.
        """
        if self.settings.enabled and self.settings.invalid_pooling is not None:
            self._log.warning(
                "vector: 不认识的 DSH_MEMORY_EMBED_POOLING=%r(可选 none/mean/cls/last/rank),已忽略,改按模型推断:%s",
                self.settings.invalid_pooling,
                self.settings.pooling or "不传 --pooling,由 GGUF 决定",
            )
        if not self._active:
            if self.settings.enabled:
                self._log.warning(
                    "vector: 向量检索不可用(%s),仅使用词法检索。%s", self.settings.unavailable_reason, ENABLE_HINT
                )
            return
        if self._thread is not None:
            return
        self._backend.status = msg("向量检索:启动中")
        self._backend.probing.set()
        self._thread = threading.Thread(target=self._run, name="dsh-vector-worker", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the worker, and the llama-server only if we spawned it. Safe to call twice."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        self._backend.close()
        if self._active:
            self._backend.status = msg("向量检索:已关闭")

    @property
    def status(self) -> str:
        """One human-readable line: off / unavailable (why) / starting / ready (model, dims, where)."""
        return self._backend.status_line()

    @property
    def ready(self) -> bool:
        return self._backend.ready.is_set()

    @property
    def spawned_pid(self) -> int | None:
        """The pid of the llama-server this channel spawned and that is running, if any."""
        return self._backend.spawned_pid

    @property
    def backfilled(self) -> int:
        """Records embedded by the backfill since start."""
        return self._backfill.backfilled

    def set_query_budget(self, seconds: float) -> None:
        """The least a search waits for its query embedding: a person at the CLI, who asked once and
        waits for this one answer, gets more than a host's turn (`QUERY_BUDGET`)."""
        self._queries.base_budget = seconds

    def wait_ready(self, timeout: float) -> bool:
        """Block until the backend is ready (for diagnostics and tests)."""
        return self._active and self._backend.ready.wait(timeout)

    def wait_saved(self, timeout: float) -> bool:
        """Block until the saves queued so far are embedded and in their sidecars (a CLI save)."""
        deadline = time.monotonic() + timeout
        while self._active and not self.read_only and time.monotonic() < deadline:
            if self._backend.ready.is_set() and not self._writes:
                return True
            if self._backend.failed_bringups:  # no backend: the backfill of a later host embeds it
                return False
            time.sleep(0.01)
        return False

    def wait_idle(self, timeout: float) -> bool:
        """Block until saves are embedded and the backfill has nothing left (diagnostics, tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._idle.wait(max(0.0, deadline - time.monotonic())) and not self._writes and not self._backfill:
                return True
            time.sleep(0.01)
        return False

    # -- the three hooks -------------------------------------------------------------------

    def query_scores(
        self, query: str, snapshots: Sequence[ScopeSnapshot], *, budget: float | None = None
    ) -> dict[str, float]:
        """id → score for the best 30 records of `snapshots` that pass the relevance gate (`search`'s scores)."""
        return self.search(query, snapshots, budget=budget).scores

    def close_pairs(self, scope: str, ids: Sequence[str], cosine: float) -> list[tuple[str, str]]:
        """The pairs of `ids` whose vectors in `scope`'s sidecar have a cosine ≥ `cosine`; none when
        there are no vectors of the current model (off, not ready yet, another model's sidecar)."""
        header = self._backend.header() if self._active else None
        if header is None:
            return []
        import numpy as np

        sv = self._cache.get(scope)
        with sv.lock:
            sv.refresh()
            if sv.header != header:
                return []
            known = [rid for rid in ids if rid in sv.rows]
            matrix = sv.matrix[[sv.rows[rid] for rid in known]]
        pairs = []
        for top in range(0, len(known), PAIR_ROWS):
            block = matrix[top : top + PAIR_ROWS] @ matrix.T
            pairs += [(known[top + a], known[b]) for a, b in np.argwhere(block >= cosine) if top + a < b]
        return pairs

    def search(self, query: str, snapshots: Sequence[ScopeSnapshot], *, budget: float | None = None) -> VectorAnswer:
        """The vector half of one search: `start_query` then `PendingSearch.finish`."""
        return self.start_query(query, budget=budget).finish(snapshots)

    def start_query(self, query: str, *, budget: float | None = None) -> PendingSearch:
        """Start embedding `query` now (its search collects it with `finish` after the lexical half),
        within `search.queries`' adaptive budget unless given. Never raises; when the vector half
        cannot take part the answer says why (a search during the first probe waits for it)."""
        if not self._active:
            return PendingSearch.answered(VectorAnswer({}, "off"))
        t0 = time.monotonic()
        wait = self._queries.budget() if budget is None else budget
        backend = self._backend
        if not backend.ready.is_set() and not backend.probing.is_set():
            return PendingSearch.answered(self._skipped(msg("向量后端尚未就绪"), "not-ready"))
        pending = None
        if backend.ready.is_set() and backend.client is not None:
            pending = self._queries.start(query, backend.header(), budget=wait)
        return PendingSearch(functools.partial(self._finish, query, pending, t0, wait))

    def _skipped(self, reason: str, kind: str) -> VectorAnswer:
        """A skipped vector half: said in the answer, and once per kind of reason on stderr."""
        self.skips[kind] = self.skips.get(kind, 0) + 1
        if self._skip_warned.first(kind):
            self._log.warning("vector: 本次检索只用了词法(%s);同类情况之后只计数,不再提示", reason)
        return VectorAnswer({}, "skipped", reason)

    def _finish(
        self, query: str, pending: PendingQuery | None, t0: float, wait: float, snapshots: Sequence[ScopeSnapshot]
    ) -> VectorAnswer:
        backend = self._backend
        try:
            if pending is None:  # the first probe was under way: wait for it within the budget
                if not backend.ready.wait(max(0.0, wait - (time.monotonic() - t0))) or backend.client is None:
                    return self._skipped(msg("向量后端尚未就绪"), "not-ready")
                pending = self._queries.start(query, backend.header(), budget=max(0.0, wait - (time.monotonic() - t0)))
            embedded = pending.result()
            if embedded.vector is None:
                return self._skipped(embedded.skipped or msg("查询嵌入不可用"), embedded.kind or "failed")
            try:
                return VectorAnswer(self._scores(embedded.vector, query, snapshots), "used")
            except Exception as exc:  # a bug here must cost the vector half of one search, not the search
                self._unexpected(msg("vector: 计算相似度出错,本次只用词法检索"), exc)
                return self._skipped(msg("计算相似度出错"), "error")
        finally:
            self.last_query_ms = (time.monotonic() - t0) * 1000

    def _unexpected(self, what: str, exc: BaseException, detail: str = "") -> None:
        """Log an unexpected error at WARNING (with its traceback) the first time, DEBUG after."""
        if not self._seen_errors.first((what, type(exc).__name__, str(exc)[:200])):
            self._log.debug("%s%s:%s", what, detail, exc)
            return
        self._log.warning("%s%s(%s: %s)", what, detail, type(exc).__name__, exc, exc_info=exc)

    def record_saved(self, scope: str, record: Record) -> None:
        """Queue `record` for embedding and appending to its scope's sidecar; never raises or waits."""
        if not self._active or self.read_only or not record.content:
            return
        self._writes.add(scope, record.id, record.content)
        self._work_arrived()

    def on_delete(self, scope: str, ids: list[str]) -> None:
        """Drop `ids` from the scope's sidecar; runs inside the scope lock (the store's callback)."""
        if not self._active or self.read_only or not ids:
            return
        self._writes.on_delete(scope, ids)

    # -- search ----------------------------------------------------------------------------

    def _scores(self, raw: list[float], query: str, snapshots: Sequence[ScopeSnapshot]) -> dict[str, float]:
        """id → ``0.5 + 0.5·P(relevant)`` for the best 30 records past the gate (`search.calibration`)."""
        import numpy as np

        from dsh_memory_mcp.search import sidecar
        from dsh_memory_mcp.search.calibration import SEED_GATE, is_cjk, margins, relevance_scores

        backend = self._backend
        if not backend.note_dims(len(raw)):
            return {}
        q = sidecar.l2_normalise(raw)[0]
        cal = backend.calibration
        floor_cjk, floor_other = cal.floors(q, is_cjk(query)) if cal is not None else (SEED_GATE, SEED_GATE)
        # The query's background: every record searched and the probes, each as its margin over its gate.
        background = [cal.probe_margins(q, floor_cjk, floor_other)] if cal is not None else []
        found: list[tuple[float, str]] = []
        for scores, ids, cjk in self._cache.cosines(q, snapshots, backend.header(), self._backfill.mark):
            over = margins(scores, np.where(cjk, floor_cjk, floor_other))
            background.append(over)
            found.extend((float(over[i]), ids[i]) for i in np.flatnonzero(over >= 0.0))
        if not found:
            return {}
        return relevance_scores(found, np.concatenate(background), MAX_CANDIDATES)

    # -- worker ----------------------------------------------------------------------------

    def _run(self) -> None:
        """The worker: its loop, restarted after an unexpected error on the breaker's schedule."""
        backend = self._backend
        crashes = 0
        try:
            while not self._stop.is_set():
                try:
                    self._loop()
                except Exception as exc:
                    crashes += 1
                    delay = min(30.0, 2.0 ** min(crashes - 1, 5))  # 1 s → 2 s → … ≤ 30 s, as the breaker
                    self.restarts += 1
                    status = backend.status
                    backend.status = msg("向量检索:后台线程出错,正在重启")
                    self._unexpected(
                        msg("vector: 后台线程出错"),
                        exc,
                        msg(",{delay} s 后重启(同样的错误之后只记 DEBUG)", delay=f"{delay:.0f}"),
                    )
                    self._idle.set()
                    self._stop.wait(delay)
                    backend.status = status
                    continue
                break
        finally:
            backend.ready.clear()
            backend.probing.clear()
            self._idle.set()
            # This thread spawned the child: stop it before the thread (and its death signal) ends.
            if backend.manager is not None:
                backend.manager.stop()

    def _loop(self) -> None:
        backend = self._backend
        next_rescan = time.monotonic() + RESCAN_INTERVAL
        backend.setup()
        while not self._stop.is_set():
            if not backend.ready.is_set():
                self._idle.clear()
                if not backend.bring_up():
                    self._sleep(min(300.0, 5.0 * 2 ** min(backend.failed_bringups - 1, 6)))
                continue
            if backend.check_requested:
                backend.check_requested = False
                if not backend.alive():
                    continue
            assert backend.client is not None
            wait = backend.client.breaker.retry_in()
            if wait > 0:
                self._sleep(wait)
                continue
            if backend.calibration is None and backend.recalibrate():
                continue
            if self.read_only:  # nothing to write: only searches use the backend
                self._idle.set()
                self._sleep(RESCAN_INTERVAL)
                continue
            if self._writes.step() or self._backfill.step():
                continue
            if time.monotonic() >= next_rescan:
                next_rescan = time.monotonic() + RESCAN_INTERVAL
                self._backfill.mark_all()
                continue
            self._idle.set()
            self._sleep(max(0.0, next_rescan - time.monotonic()))

    def _sleep(self, seconds: float) -> None:
        if self._wake.wait(seconds):
            self._wake.clear()

    # -- rebuild and figures ---------------------------------------------------------------

    def reembed(self, scopes: Sequence[str], progress: Callable[[int, int], None] | None = None) -> int:
        """Rewrite the sidecars of `scopes` whole under their scope locks, one fresh vector per live
        record (a scope with nothing to embed and no sidecar gets none); the count written. A
        channel not started brings the backend up on the calling thread (`close` stops what it
        spawned). `progress(done, total)` is called before the first batch and after each one.

        :raises EmbeddingUnavailable: vectors off or unconfigured, the backend cannot be reached,
            embedding keeps failing, or the model's width changed during the rebuild.
        """
        backend = self._backend
        if not self._active:
            raise EmbeddingUnavailable(self.settings.unavailable_reason or msg("向量检索已关闭"))
        if self.read_only:
            raise EmbeddingUnavailable(msg("只读模式不重建向量"))
        if self._thread is None:
            backend.setup()
            if not backend.ready.is_set() and not backend.bring_up():
                raise EmbeddingUnavailable(backend.last_problem or msg("向量后端不可用"))
        elif not backend.ready.wait(backend.load_timeout):
            raise EmbeddingUnavailable(backend.last_problem or msg("向量后端没有就绪"))
        from dsh_memory_mcp.search import sidecar

        now = now_ms()
        plan: list[tuple[str, list[Record]]] = []
        for scope in scopes:
            live = {r.id: r for r in self.store.snapshot(scope).records if r.content and not r.is_expired(now)}
            plan.append((scope, list(live.values())))
        total = sum(len(items) for _, items in plan)
        done = 0
        if progress is not None:
            progress(done, total)
        dims = backend.dims
        written = 0
        for scope, items in plan:
            entries: list[tuple[str, list[float]]] = []
            for start in range(0, len(items), SAVE_BATCH):
                batch = items[start : start + SAVE_BATCH]
                vectors = backend.embed_with_retries([r.content for r in batch])
                if backend.dims != dims:
                    raise EmbeddingUnavailable(
                        msg("重建过程中嵌入维度从 {dims} 变为 {dims2},请重新运行", dims=dims, dims2=backend.dims)
                    )
                entries.extend((r.id, v) for r, v in zip(batch, vectors, strict=True))
                done += len(batch)
                if progress is not None:
                    progress(done, total)
            header = backend.header()
            path = self.store.layout.vec_path(scope)
            if header is None or (not entries and not os.path.exists(path)):
                continue
            rows = sidecar.normalised_rows(entries)
            with self.store.lock(scope):
                sidecar.write(path, header, rows)
            sv = self._cache.get(scope)
            with sv.lock:
                sv.reset()
            written += len(rows)
        return written

    def stats(self) -> dict[str, Any]:
        """Numbers for a doctor command: state, model, width, cached rows per scope, backfilled."""
        return {
            "status": self.status,
            #: Why the backend is unusable now (the reason inside `status`), None when it is not known to be.
            "problem": self._backend.last_problem,
            "ready": self.ready,
            "model": self._backend.model_id,
            "dims": self._backend.dims,
            "rows": self._cache.rows(),
            "backfilled": self.backfilled,
            #: Saves waiting for their vector, and records the backfill has still to embed.
            "pending": len(self._writes) + self._backfill.remaining,
            "backfill_remaining": self._backfill.remaining,
            "backfill_rate": self._backfill.rate(),
            "last_query_ms": self.last_query_ms,
            "calibration": cal.lines() if (cal := self._backend.calibration) is not None else None,
            "calibration_seed_rule": cal.seed_rule if cal is not None else None,
            "breaker_failures": client.breaker.failures if (client := self._backend.client) is not None else 0,
            "restarts": self.restarts,
            "vector_skips": dict(self.skips),
            "query_embeddings": self._queries.stats(),
            "query_budget_ms": round(self._queries.budget() * 1000),
            "cache_evictions": self._cache.evictions,
        }
