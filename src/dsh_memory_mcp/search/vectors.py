"""`VectorChannel`: the optional semantic half of hybrid search (SPEC §7, §8).

It answers one question for a search — which records are within cosine 0.5 of the query — and
keeps the `.vec` sidecars filled: a saved record is embedded and appended, a deleted one is
removed, and records without a vector (saved while the backend was down, by another writer, or
voided by a model change) are backfilled in the background.

It must never cost the caller anything when the backend is off, slow or dead:

* Off (``DSH_MEMORY_VECTOR=off``) or unconfigured: every method is a no-op; numpy and httpx are
  not even imported (cold start), and no sidecar is written.
* Not ready yet (llama-server still loading): a search gets ``{}`` at once, no request.
* Slow: a query embedding gets 300 ms in total, then the search answers lexically.
* Dead: the client's circuit breaker stops requests (1 s → 2 s → … ≤ 30 s), and the worker
  checks whether the backend vanished, spawning a new one if it was local.

All network and spawn work happens on one long-lived worker thread. It must be the thread that
spawns llama-server: PR_SET_PDEATHSIG fires when the *spawning thread* exits, so a short-lived
thread would take the child down with it.

Vectors are held as one float32 matrix per scope, cached against the sidecar's inode and the
byte offset read so far: an append (ours or another process's) is picked up by reading just the
new tail; only a rewrite (new inode) causes a full read.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp.config import VectorSettings
from dsh_memory_mcp.errors import DshMemoryError, EmbeddingUnavailable
from dsh_memory_mcp.store.records import Record, now_ms

if TYPE_CHECKING:  # numpy and the HTTP client load only when vectors are on
    import numpy as np
    import numpy.typing as npt

    from dsh_memory_mcp.search.embedding import EmbeddingClient, LlamaServerManager
    from dsh_memory_mcp.search.sidecar import Header
    from dsh_memory_mcp.store.shared import ScopeSnapshot, SharedStore

__all__ = [
    "BACKFILL_BATCH",
    "ENABLE_HINT",
    "MAX_CANDIDATES",
    "MIN_COSINE",
    "QUERY_BUDGET",
    "WRITE_BUDGET",
    "VectorChannel",
]

logger = logging.getLogger("dsh_memory_mcp.search.vectors")

#: Seconds a search may spend on its query embedding before answering lexically (SPEC §8).
QUERY_BUDGET = 0.3
#: Seconds for one embedding request on the write/backfill path (whole records on a CPU).
WRITE_BUDGET = 10.0
#: Candidates below this cosine are noise; at most this many go to the ranking (SPEC §7).
MIN_COSINE = 0.5
MAX_CANDIDATES = 30
#: Records per backfill request: small enough that a search embedding is never stuck behind a
#: long batch on a 2-core machine, large enough to amortise the HTTP round trip.
BACKFILL_BATCH = 16
#: Saved records embedded per request.
SAVE_BATCH = 32
#: Idle worker rescans every scope this often, to pick up records other writers left unembedded.
RESCAN_INTERVAL = 60.0
#: A search does not wait longer than this for a scope's matrix that another thread is loading.
_SCOPE_LOCK_WAIT = 0.05
_CACHE_KEY = "vectors"
_MAX_PENDING_SAVES = 10_000

ENABLE_HINT = (
    "启用方法:把 DSH_MEMORY_EMBED_MODEL 设为一个 .gguf 嵌入模型文件(并让 llama-server 在 PATH 上,"
    "或用 DSH_MEMORY_EMBED_EXE 指定它的路径),或把 DSH_MEMORY_EMBED_ENDPOINT 设为已在运行的嵌入服务地址;"
    "设 DSH_MEMORY_VECTOR=off 可关闭向量检索并不再显示本提示"
)


class _ScopeVectors:
    """One scope's sidecar as a matrix, kept in step with the file by reading only what was appended.

    `rows` maps id → row; a duplicate id (two writers embedded the same record) overwrites its
    row, so every row is one distinct id. Guarded by `lock`; readers take `view()` under it and
    compute outside (rows beyond the view are written later, the view itself stays valid).
    """

    def __init__(self, path: str) -> None:
        import numpy as np

        self.path = path
        self.lock = threading.Lock()
        self.identity: tuple[int, int] | None = None
        self.end = 0
        self.header: Header | None = None
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.matrix: npt.NDArray[np.float32] = np.zeros((0, 0), dtype=np.float32)
        self.n = 0
        #: Bumped on every change, so per-snapshot masks know when to recompute.
        self.version = 0

    def reset(self) -> None:
        import numpy as np

        self.identity = None
        self.end = 0
        self.header = None
        self.ids = []
        self.rows = {}
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.n = 0
        self.version += 1

    def refresh(self) -> None:
        """Bring the matrix up to date with the file: nothing, its tail, or (new inode) all of it."""
        from dsh_memory_mcp.search import sidecar

        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self.identity is not None:
                self.reset()
            return
        identity = (st.st_dev, st.st_ino)
        if identity == self.identity and st.st_size == self.end:
            return
        if identity == self.identity and st.st_size > self.end and self.header is not None:
            tail = sidecar.read(self.path, start=self.end, header=self.header)
            if tail is not None and tail.identity == identity:
                self._extend(tail.ids, tail.vectors)
                self.end = tail.end
                return
        full = sidecar.read(self.path)
        self.reset()
        if full is None:
            return
        self.identity = full.identity
        self.end = full.end
        self.header = full.header
        if full.header is not None:
            self._extend(full.ids, full.vectors)

    def _extend(self, ids: list[str], vectors: npt.NDArray[np.float32]) -> None:
        import numpy as np

        from dsh_memory_mcp.search import sidecar

        if not ids or self.header is None:
            return
        dims = self.header[1]
        # DSH's vectors should already be unit length; normalising again makes cosine a plain dot.
        vectors = sidecar.l2_normalise(vectors)
        need = self.n + len(ids)
        if self.matrix.shape[1] != dims or need > self.matrix.shape[0]:
            grown = np.zeros((max(need, 2 * self.matrix.shape[0], 64), dims), dtype=np.float32)
            if self.matrix.shape[1] == dims:
                grown[: self.n] = self.matrix[: self.n]
            self.matrix = grown
        for rid, vec in zip(ids, vectors, strict=True):
            row = self.rows.get(rid)
            if row is None:
                row = self.n
                self.rows[rid] = row
                self.ids.append(rid)
                self.n += 1
            self.matrix[row] = vec
        self.version += 1

    def drop(self, ids: set[str]) -> None:
        import numpy as np

        keep = [i for i, rid in enumerate(self.ids) if rid not in ids]
        self.matrix = np.ascontiguousarray(self.matrix[keep]) if keep else self.matrix[:0]
        self.ids = [self.ids[i] for i in keep]
        self.rows = {rid: i for i, rid in enumerate(self.ids)}
        self.n = len(self.ids)
        self.version += 1


class VectorChannel:
    """Vector recall for search, embed-on-save, delete and backfill of the `.vec` sidecars.

    :param settings: resolved `VectorSettings`; when off or unusable, every method is a no-op.
    :param store: the `SharedStore` whose scopes get sidecars (``<scope file>.vec``); pass
        `on_delete` to it as ``SharedStore(on_delete=channel.on_delete)`` (or a forwarder).
    :param load_timeout: seconds to wait for a spawned llama-server to load its model.
    """

    def __init__(
        self,
        settings: VectorSettings,
        store: SharedStore,
        *,
        log: logging.Logger | None = None,
        load_timeout: float = 120.0,
    ) -> None:
        self.settings = settings
        self.store = store
        self._log = log or logger
        self._active = settings.usable
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._ready = threading.Event()
        self._idle = threading.Event()
        self._state_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._status = "向量检索:关闭(DSH_MEMORY_VECTOR=off)" if not settings.enabled else "向量检索:尚未启动"
        self._pending: deque[tuple[str, str, str]] = deque(maxlen=_MAX_PENDING_SAVES)
        self._dirty: OrderedDict[str, None] = OrderedDict()
        self._scopes: dict[str, _ScopeVectors] = {}
        self._check_requested = False
        self._failed_bringups = 0
        self._last_problem: str | None = None
        self._model_id = settings.model_id
        self._dims: int | None = None
        self._load_timeout = load_timeout
        self._client: EmbeddingClient | None = None
        self._manager: LlamaServerManager | None = None
        #: Figures for status and tests: records embedded by the backfill, last query time.
        self.backfilled = 0
        self.last_query_ms: float | None = None
        if not self._active and settings.enabled:
            self._status = f"向量检索:不可用({settings.unavailable_reason})"

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
        self._status = "向量检索:启动中"
        self._thread = threading.Thread(target=self._run, name="dsh-vector-worker", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop the worker, and the llama-server only if we spawned it. Safe to call twice."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)
        if self._manager is not None:
            self._manager.stop()
            self._manager.close()
        if self._client is not None:
            self._client.close()
        self._ready.clear()
        if self._active:
            self._status = "向量检索:已关闭"

    @property
    def status(self) -> str:
        """One human-readable line: off / unavailable (why) / starting / ready (model, dims, where)."""
        status = self._status
        client = self._client
        if self._ready.is_set() and client is not None and client.breaker.failures:
            status += f";熔断中(连续失败 {client.breaker.failures} 次,{client.breaker.retry_in():.1f} s 后重试)"
        return status

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    @property
    def spawned_pid(self) -> int | None:
        """The pid of the llama-server this channel spawned and that is running, if any."""
        return self._manager.pid if self._manager is not None else None

    def wait_ready(self, timeout: float) -> bool:
        """Block until the backend is ready (for diagnostics and tests)."""
        return self._active and self._ready.wait(timeout)

    def wait_idle(self, timeout: float) -> bool:
        """Block until saves are embedded and the backfill has nothing left (diagnostics, tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._idle.wait(max(0.0, deadline - time.monotonic())) and not self._pending and not self._dirty:
                return True
            time.sleep(0.01)
        return False

    # -- the three hooks -------------------------------------------------------------------

    def query_scores(self, query: str, snapshots: Sequence[ScopeSnapshot]) -> dict[str, float]:
        """id → cosine for the records of `snapshots` within 0.5 of `query`, the best 30.

        ``{}`` when vectors are off, the backend is not ready, the breaker is open or the
        embedding takes longer than 300 ms; never raises.
        """
        if not self._active or not self._ready.is_set() or self._client is None:
            return {}
        t0 = time.monotonic()
        try:
            raw = self._client.embed([query], timeout=QUERY_BUDGET)
        except EmbeddingUnavailable as exc:
            self._embedding_failed(exc)
            return {}
        except Exception:
            self._log.debug("vector: 查询嵌入出错", exc_info=True)
            return {}
        try:
            return self._scores(raw[0], snapshots)
        except Exception:  # a bug here must cost the vector half of one search, not the search
            self._log.warning("vector: 计算相似度出错,本次只用词法检索", exc_info=True)
            return {}
        finally:
            self.last_query_ms = (time.monotonic() - t0) * 1000

    def record_saved(self, scope: str, record: Record) -> None:
        """Queue `record` for embedding and appending to its scope's sidecar; never raises or waits."""
        if not self._active or not record.content:
            return
        self._pending.append((scope, record.id, record.content))
        self._idle.clear()
        self._wake.set()

    def on_delete(self, scope: str, ids: list[str]) -> None:
        """Drop `ids` from the scope's sidecar; runs inside the scope lock (the store's callback).

        Local file work only (no network), and never raises: the JSONL delete already happened.
        """
        if not self._active or not ids:
            return
        try:
            from dsh_memory_mcp.search import sidecar

            sv = self._scope_vectors(scope)
            with sv.lock:
                sv.refresh()
                removal = sidecar.remove_ids(sv.path, ids)
                if removal is None:
                    return
                if sv.identity is not None and removal.old_size == sv.end:
                    # The cache held exactly the old file: drop the rows instead of a full re-read.
                    sv.drop(set(ids))
                    sv.identity = removal.written.identity
                    sv.end = removal.written.size
                else:
                    sv.reset()
        except Exception:
            self._log.warning("vector: 从 %s 的向量文件删除 %d 条向量失败", scope, len(ids), exc_info=True)

    # -- search ----------------------------------------------------------------------------

    def _scores(self, raw: list[float], snapshots: Sequence[ScopeSnapshot]) -> dict[str, float]:
        import numpy as np

        from dsh_memory_mcp.search import sidecar

        if not self._note_dims(len(raw)):
            return {}
        q = sidecar.l2_normalise(raw)[0]
        header = self._header()
        found: list[tuple[float, str]] = []
        for snap in snapshots:
            sv = self._scope_vectors(snap.scope)
            if not sv.lock.acquire(timeout=_SCOPE_LOCK_WAIT):
                continue  # the worker is loading this scope right now; it'll be there next time
            try:
                sv.refresh()
                matrix, ids, version = sv.matrix[: sv.n], sv.ids, sv.version
                valid = sv.header == header
            finally:
                sv.lock.release()
            mask = self._live_mask(snap, sv, version, ids, len(matrix), valid)
            if mask is None or not len(matrix):
                continue
            scores = matrix @ q
            hits = np.flatnonzero((scores >= MIN_COSINE) & mask)
            found.extend((float(scores[i]), ids[i]) for i in hits)
        best: dict[str, float] = {}
        for score, rid in heapq.nlargest(MAX_CANDIDATES, found):
            best.setdefault(rid, min(score, 1.0))
        return best

    def _live_mask(
        self, snap: ScopeSnapshot, sv: _ScopeVectors, version: int, ids: list[str], n: int, valid: bool
    ) -> npt.NDArray[np.bool_] | None:
        """Which matrix rows are live records of this snapshot; cached on the snapshot.

        Computing it also tells whether some live record has no vector (or the sidecar is
        another model's): then the scope is queued for backfill, once per snapshot/sidecar pair.
        """
        import numpy as np

        key = (id(sv), version, n, valid, self._header())
        cached = snap.cache.get(_CACHE_KEY)
        if cached is not None and cached[0] == key:
            mask: npt.NDArray[np.bool_] | None = cached[1]
            return mask
        now = now_ms()
        live = {r.id for r in snap.records if not r.is_expired(now)}
        if valid:
            mask = np.fromiter((rid in live for rid in ids[:n]), dtype=bool, count=n)
            missing = any(rid not in sv.rows for rid in live)
        else:
            mask = None
            missing = bool(live)
        snap.cache[_CACHE_KEY] = (key, mask)
        if missing:
            self._mark_dirty(snap.scope)
        return mask

    # -- worker ----------------------------------------------------------------------------

    def _setup(self) -> None:
        """Create the HTTP client (and the llama-server manager) on the worker thread.

        Importing httpx and building a client costs ~0.1 s; doing it here keeps it off the
        server's start-up path.
        """
        from dsh_memory_mcp.search.embedding import LOG_FILE_NAME, EmbeddingClient, LlamaServerManager

        settings = self.settings
        if settings.endpoint:
            # OpenAI-style servers need a "model"; DSH_MEMORY_EMBED_MODEL names it, else /v1/models.
            self._client = EmbeddingClient(settings.endpoint, model=settings.model_id if settings.model else None)
        else:
            self._manager = LlamaServerManager(
                settings, log_path=os.path.join(self.store.root, LOG_FILE_NAME), load_timeout=self._load_timeout
            )
            self._client = EmbeddingClient(self._manager.base_url, api="auto")

    def _run(self) -> None:
        next_rescan = time.monotonic() + RESCAN_INTERVAL
        try:
            self._setup()
            while not self._stop.is_set():
                if not self._ready.is_set():
                    if not self._bring_up():
                        self._sleep(min(300.0, 5.0 * 2 ** min(self._failed_bringups - 1, 6)))
                    continue
                if self._check_requested:
                    self._check_requested = False
                    if not self._backend_alive():
                        continue
                assert self._client is not None
                wait = self._client.breaker.retry_in()
                if wait > 0:
                    self._sleep(wait)
                    continue
                if self._embed_pending() or self._backfill_step():
                    continue
                if time.monotonic() >= next_rescan:
                    next_rescan = time.monotonic() + RESCAN_INTERVAL
                    self._mark_all_dirty()
                    continue
                self._idle.set()
                self._sleep(max(0.0, next_rescan - time.monotonic()))
        except Exception:
            self._status = "向量检索:后台线程出错,已退化为纯词法检索"
            self._log.exception("vector: 后台线程出错,向量检索停用")
        finally:
            self._ready.clear()
            self._idle.set()
            # This thread spawned the child: stop it before the thread (and its death signal) ends.
            if self._manager is not None:
                self._manager.stop()

    def _sleep(self, seconds: float) -> None:
        if self._wake.wait(seconds):
            self._wake.clear()

    def _bring_up(self) -> bool:
        """Reach a ready backend, learn its model and width; False (logged) when it cannot."""
        assert self._client is not None
        client = self._client
        self._idle.clear()
        try:
            if self._manager is not None:
                self._status = "向量检索:正在连接/启动 llama-server"
                origin = self._manager.ensure(self._stop)
                where = self._manager.base_url
            else:
                origin = "endpoint"
                where = client.base_url
                self._wait_endpoint(client)
            info = client.model_info()
            model_id = self._pick_model_id(origin, info.model_id)
            if origin == "endpoint" and client.model is None and info.name:
                client.model = info.name
            client.breaker.reset()
            probe = client.embed(["dimension probe"], timeout=WRITE_BUDGET)
        except EmbeddingUnavailable as exc:
            self._failed_bringups += 1
            self._problem(str(exc))
            return False
        self._model_id = model_id
        self._dims = len(probe[0])
        self._failed_bringups = 0
        self._last_problem = None
        how = {"spawned": f"本进程启动 pid={self.spawned_pid}", "reused": "复用已运行的服务", "endpoint": "外部端点"}
        self._status = f"向量检索:就绪 model={self._model_id} dims={self._dims} {where}({how.get(origin, origin)})"
        if origin == "reused":
            self._log.info("vector: 复用已在运行的 llama-server %s(不归本进程管理,退出时不会停止它)", where)
        self._log.info("vector: 向量后端就绪 model=%s dims=%s %s", self._model_id, self._dims, where)
        self._ready.set()
        self._mark_all_dirty()
        return True

    def _wait_endpoint(self, client: EmbeddingClient) -> None:
        deadline = time.monotonic() + self._load_timeout
        while True:
            health = client.health(timeout=2.0)
            if health == "down":
                raise EmbeddingUnavailable(f"无法连接嵌入服务 {self.settings.endpoint}(DSH_MEMORY_EMBED_ENDPOINT)")
            if health != "loading":
                return  # ready, or a server without llama-server's /health (OpenAI-compatible)
            if time.monotonic() > deadline or self._stop.wait(0.2):
                raise EmbeddingUnavailable(f"嵌入服务 {self.settings.endpoint} 一直在加载模型")

    def _pick_model_id(self, origin: str, served: str | None) -> str:
        """The id for sidecar headers: the model that actually produces the vectors.

        A reused server may be DSH's with another model than ours; writing its vectors under our
        model's header would mix two spaces in one file, so its own model wins (with a warning).
        """
        configured = self.settings.model_id
        if origin == "spawned" or not served or served == configured:
            return configured
        if origin == "endpoint":
            # An explicit DSH_MEMORY_EMBED_MODEL names the endpoint's model; else trust the server.
            return configured if self.settings.model else served
        self._log.warning(
            "vector: 端口 %s 上已在运行的 llama-server 加载的是 %s,不是配置的 %s;向量按 %s 记录",
            self.settings.port,
            served,
            configured,
            served,
        )
        return served

    def _problem(self, reason: str) -> None:
        self._status = f"向量检索:不可用({reason}),已退化为纯词法检索"
        if reason != self._last_problem:
            self._log.warning("vector: 向量后端不可用(%s),退化为纯词法检索", reason)
            self._last_problem = reason

    def _backend_alive(self) -> bool:
        """After a failed request: is the backend still there? If not, bring one up on the next turn."""
        assert self._client is not None
        if self._manager is None:
            return True  # an endpoint: the breaker paces the retries
        if self._manager.owned or self._client.health() != "down":
            return True
        self._log.warning("vector: llama-server %s 已不在运行,将重新连接或启动", self._manager.base_url)
        self._ready.clear()
        self._manager.stop()  # reap our child if it was ours and died
        return False

    def _embedding_failed(self, exc: EmbeddingUnavailable) -> None:
        """A request failed: have the worker check whether a local backend is gone.

        Not when the breaker refused to send one: that would turn "no request while open" into
        a health probe per search.
        """
        from dsh_memory_mcp.search.embedding import BreakerOpen

        if isinstance(exc, BreakerOpen):
            return
        self._log.debug("vector: 嵌入失败:%s", exc)
        if self._manager is not None and not self._check_requested:
            self._check_requested = True
            self._wake.set()

    def _embed_pending(self) -> bool:
        batch: list[tuple[str, str, str]] = []
        while self._pending and len(batch) < SAVE_BATCH:
            try:
                batch.append(self._pending.popleft())
            except IndexError:
                break
        if not batch:
            return False
        # The backfill may have got there first (it saw the record before record_saved queued
        # it): skip what the sidecar already holds rather than append a duplicate line.
        header = self._header()
        for scope in {scope for scope, _, _ in batch}:
            sv = self._scope_vectors(scope)
            with sv.lock:
                sv.refresh()
                if sv.header == header:
                    batch = [item for item in batch if item[0] != scope or item[1] not in sv.rows]
        if not batch:
            return True
        try:
            vectors = self._embed([text for _, _, text in batch])
        except EmbeddingUnavailable as exc:
            self._pending.extendleft(reversed(batch))
            self._embedding_failed(exc)
            return True
        by_scope: dict[str, list[tuple[str, list[float]]]] = {}
        for (scope, rid, _), vec in zip(batch, vectors, strict=True):
            by_scope.setdefault(scope, []).append((rid, vec))
        for scope, entries in by_scope.items():
            self._write(scope, entries)
        return True

    def _backfill_step(self) -> bool:
        """Embed one batch of one scope's records that lack a vector; False when nothing is left."""
        with self._state_lock:
            if not self._dirty:
                return False
            scope, _ = self._dirty.popitem(last=False)
        try:
            snap = self.store.snapshot(scope)
        except DshMemoryError:
            return True
        sv = self._scope_vectors(scope)
        with sv.lock:
            sv.refresh()
            have = sv.rows if sv.header == self._header() else {}
            now = now_ms()
            missing = [r for r in snap.records if r.content and not r.is_expired(now) and r.id not in have]
        if not missing:
            return True
        batch = missing[:BACKFILL_BATCH]
        try:
            vectors = self._embed([r.content for r in batch])
        except EmbeddingUnavailable as exc:
            self._mark_dirty(scope)
            self._embedding_failed(exc)
            return True
        self._write(scope, [(r.id, v) for r, v in zip(batch, vectors, strict=True)])
        self.backfilled += len(batch)
        if len(missing) > len(batch):
            self._mark_dirty(scope)  # to the back: scopes take turns
        return True

    def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self._client is not None
        vectors = self._client.embed(texts, timeout=WRITE_BUDGET)
        if not self._note_dims(len(vectors[0])):
            raise EmbeddingUnavailable("嵌入维度变了,按新维度重建")
        return vectors

    def _write(self, scope: str, entries: list[tuple[str, list[float]]]) -> None:
        """Append `entries` to the scope's sidecar; create or re-head it under the scope lock."""
        from dsh_memory_mcp.search import sidecar

        header = self._header()
        if header is None:
            return
        normalised = sidecar.l2_normalise([vec for _, vec in entries])
        rows = [(rid, normalised[i]) for i, (rid, _) in enumerate(entries)]
        path = self._vec_path(scope)
        try:
            if sidecar.append(path, header, rows):
                return
            with self.store.lock(scope):
                current = sidecar.read_header(path)
                if current == header:
                    sidecar.append(path, header, rows)
                    return
                if current is not None:
                    self._log.warning(
                        "vector: %s 的向量文件由 %s/%d 维生成,当前模型是 %s/%d 维:作废并重新嵌入",
                        os.path.basename(path),
                        current[0],
                        current[1],
                        header[0],
                        header[1],
                    )
                sidecar.write(path, header, rows)
            self._mark_dirty(scope)  # a new or voided file: the rest of the scope needs vectors
        except (OSError, DshMemoryError) as exc:
            # LockTimeout, disk full…: the vectors are lost, the backfill will try again.
            self._log.warning("vector: 写入 %s 失败:%s", path, exc)
            self._mark_dirty(scope)

    # -- helpers ---------------------------------------------------------------------------

    def _header(self) -> Header | None:
        dims = self._dims
        return (self._model_id, dims) if dims is not None else None

    def _note_dims(self, dims: int) -> bool:
        """Whether `dims` is the width we expect; a change (the model was swapped) re-heads everything."""
        if dims == self._dims:
            return True
        with self._state_lock:
            changed = dims != self._dims
            if changed:
                self._log.warning("vector: 嵌入维度从 %s 变为 %s,所有向量文件将按新维度重建", self._dims, dims)
                self._dims = dims
                self._status = f"向量检索:就绪 model={self._model_id} dims={dims}(维度刚变更,正在重建)"
        if changed:
            self._mark_all_dirty()
        return False

    def _vec_path(self, scope: str) -> str:
        return self.store.layout.vec_path(scope)

    def _scope_vectors(self, scope: str) -> _ScopeVectors:
        with self._state_lock:
            sv = self._scopes.get(scope)
            if sv is None:
                sv = self._scopes[scope] = _ScopeVectors(self._vec_path(scope))
            return sv

    def _mark_dirty(self, scope: str) -> None:
        with self._state_lock:
            self._dirty[scope] = None
        self._idle.clear()
        self._wake.set()

    def _mark_all_dirty(self) -> None:
        try:
            found = self.store.discover_scopes()
        except DshMemoryError as exc:
            self._log.warning("vector: 无法列出记忆作用域:%s", exc)
            return
        for scope in found:
            self._mark_dirty(scope)

    def reembed(self, scopes: Sequence[str], progress: Callable[[int, int], None] | None = None) -> int:
        """Rebuild the sidecars of `scopes` from scratch: one vector per live record; the count written.

        For a human command: every live record with content is embedded again with the current
        backend (batches of `SAVE_BATCH`, each retried while the breaker allows, 3 tries), then the
        scope's ``.vec`` is rewritten whole under the scope lock (a scope with nothing to embed
        and no sidecar gets none). `progress(done, total)` is called before the first batch and
        after each one. When the channel was not started, the backend is brought up on the
        calling thread (which may spawn llama-server: `close` stops it); the worker is never
        started.

        :raises EmbeddingUnavailable: vectors off or unconfigured, the backend cannot be reached,
            embedding keeps failing, or the model's width changed during the rebuild.
        """
        from dsh_memory_mcp.search import sidecar

        if not self._active:
            raise EmbeddingUnavailable(self.settings.unavailable_reason or "向量检索已关闭")
        if self._thread is None:
            if self._client is None:
                self._setup()
            if not self._ready.is_set() and not self._bring_up():
                raise EmbeddingUnavailable(self._last_problem or "向量后端不可用")
        elif not self._ready.wait(self._load_timeout):
            raise EmbeddingUnavailable(self._last_problem or "向量后端没有就绪")
        now = now_ms()
        plan: list[tuple[str, list[Record]]] = []
        for scope in scopes:
            live: dict[str, Record] = {}
            for record in self.store.snapshot(scope).records:
                if record.content and not record.is_expired(now):
                    live[record.id] = record
            plan.append((scope, list(live.values())))
        total = sum(len(items) for _, items in plan)
        done = 0
        if progress is not None:
            progress(done, total)
        dims = self._dims
        written = 0
        for scope, items in plan:
            entries: list[tuple[str, list[float]]] = []
            for start in range(0, len(items), SAVE_BATCH):
                batch = items[start : start + SAVE_BATCH]
                vectors = self._embed_with_retries([r.content for r in batch])
                if self._dims != dims:
                    raise EmbeddingUnavailable(f"重建过程中嵌入维度从 {dims} 变为 {self._dims},请重新运行")
                entries.extend((r.id, v) for r, v in zip(batch, vectors, strict=True))
                done += len(batch)
                if progress is not None:
                    progress(done, total)
            header = self._header()
            path = self._vec_path(scope)
            if header is None or (not entries and not os.path.exists(path)):
                continue
            rows: list[tuple[str, npt.NDArray[np.float32]]] = []
            if entries:
                normalised = sidecar.l2_normalise([vec for _, vec in entries])
                rows = [(rid, normalised[i]) for i, (rid, _) in enumerate(entries)]
            with self.store.lock(scope):
                sidecar.write(path, header, rows)
            sv = self._scope_vectors(scope)
            with sv.lock:
                sv.reset()
            written += len(rows)
        return written

    def _embed_with_retries(self, texts: list[str], tries: int = 3) -> list[list[float]]:
        assert self._client is not None
        for attempt in range(1, tries + 1):
            try:
                return self._embed(texts)
            except EmbeddingUnavailable:
                if attempt == tries or self._stop.is_set():
                    raise
                self._stop.wait(max(0.05, self._client.breaker.retry_in()))
        raise AssertionError("unreachable")  # pragma: no cover

    def stats(self) -> dict[str, Any]:
        """Numbers for a doctor command: state, model, width, cached rows per scope, backfilled."""
        return {
            "status": self.status,
            "ready": self.ready,
            "model": self._model_id,
            "dims": self._dims,
            "rows": {scope: sv.n for scope, sv in list(self._scopes.items())},
            "backfilled": self.backfilled,
            "pending": len(self._pending),
            "last_query_ms": self.last_query_ms,
        }
