"""Query embeddings for search: a cache, an adaptive budget, and requests that may outlive their search
(docs/design.md: Embedding backend, "Query embeddings").

A request runs on its own thread with the deadline `LET_FINISH`: a search that stops waiting leaves
it running and its vector lands in the cache; a search for a query in flight waits for that request.
"""

from __future__ import annotations

import functools
import statistics
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from dsh_memory_mcp.errors import EmbeddingUnavailable
from dsh_memory_mcp.texts import msg

#: Cached query vectors.
MAX_CACHED = 256
#: Query embeddings running at once (a search that gave up leaves its request running).
MAX_IN_FLIGHT = 2
#: The longest a search waits for its query embedding, however slow recent ones were.
MAX_BUDGET = 1.0
#: The deadline of the request itself: it may finish long after its search answered.
LET_FINISH = 10.0
#: How many recent durations the adaptive budget looks at.
_RECENT = 8


@dataclass(frozen=True)
class Embedded:
    """The query's raw vector, or why there is none (`skipped`, a Chinese reason)."""

    vector: list[float] | None
    skipped: str | None = None
    #: What kind of reason (``timeout``, ``busy``, ``breaker``, ``failed``): stderr says each once.
    kind: str | None = None


class _Request:
    __slots__ = ("done", "error", "started", "vector")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.vector: list[float] | None = None
        self.error: BaseException | None = None
        self.started = time.monotonic()


@dataclass(frozen=True)
class PendingQuery:
    """A query embedding under way: `result()` waits for it within what is left of the budget."""

    result: Callable[[], Embedded]

    @staticmethod
    def answered(answer: Embedded) -> PendingQuery:
        return PendingQuery(lambda: answer)


class QueryEmbedder:
    """The cache, the requests in flight and the recent durations of one vector channel's query embeddings.

    :param embed: the raw vector of one query within a deadline (raises `EmbeddingUnavailable`).
    :param on_failure: called with a request's `EmbeddingUnavailable` (the backend's bookkeeping).
    :param base_budget: the budget when nothing is known or recent embeddings were fast.
    """

    def __init__(
        self,
        embed: Callable[[str, float], list[float]],
        on_failure: Callable[[EmbeddingUnavailable], None],
        base_budget: float,
    ) -> None:
        self._embed = embed
        self._on_failure = on_failure
        self.base_budget = base_budget
        self._lock = threading.Lock()
        self._cache: OrderedDict[Hashable, list[float]] = OrderedDict()
        self._in_flight: dict[Hashable, _Request] = {}
        self._recent: deque[float] = deque(maxlen=_RECENT)
        #: Searches answered from the cache (stats, tests).
        self.hits = 0

    def budget(self) -> float:
        """How long a search waits now: 1.5 × the recent median up to `MAX_BUDGET`, never below the base budget."""
        with self._lock:
            recent = list(self._recent)
        if not recent:
            return self.base_budget
        return max(self.base_budget, min(MAX_BUDGET, 1.5 * statistics.median(recent)))

    def start(self, query: str, space: Hashable, *, budget: float | None = None) -> PendingQuery:
        """Begin embedding `query` for vectors of `space` (the sidecar header); never blocks."""
        t0 = time.monotonic()
        wait = self.budget() if budget is None else budget
        key = (space, query)
        with self._lock:
            vector = self._cache.get(key)
            if vector is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return PendingQuery.answered(Embedded(vector))
            request = self._in_flight.get(key)
            if request is None:
                if len(self._in_flight) >= MAX_IN_FLIGHT:
                    busy = Embedded(None, msg("前面的查询嵌入还没算完(嵌入服务很慢),本次没有再排队"), "busy")
                    return PendingQuery.answered(busy)
                request = self._in_flight[key] = _Request()
                threading.Thread(
                    target=self._run, args=(key, query, request), name="dsh-query-embed", daemon=True
                ).start()
        return PendingQuery(functools.partial(self._result, request, t0, wait))

    def _result(self, request: _Request, t0: float, budget: float) -> Embedded:
        if not request.done.wait(max(0.0, budget - (time.monotonic() - t0))):
            return Embedded(
                None,
                msg(
                    "查询嵌入超过 {value} ms 预算(后台继续计算,同样的查询再问时直接使用)",
                    value=f"{budget * 1000:.0f}",
                ),
                "timeout",
            )
        if request.vector is None:
            return Embedded(None, *self.describe(request.error))
        return Embedded(request.vector)

    def _run(self, key: Hashable, query: str, request: _Request) -> None:
        try:
            request.vector = self._embed(query, LET_FINISH)
        except EmbeddingUnavailable as exc:
            request.error = exc
            self._on_failure(exc)
        except Exception as exc:  # reported by the search that waits; never kills the thread silently
            request.error = exc
        finally:
            took = time.monotonic() - request.started
            with self._lock:
                self._in_flight.pop(key, None)
                if request.vector is not None:
                    self._recent.append(took)
                    self._cache[key] = request.vector
                    self._cache.move_to_end(key)
                    while len(self._cache) > MAX_CACHED:
                        self._cache.popitem(last=False)
            request.done.set()

    @staticmethod
    def describe(error: BaseException | None) -> tuple[str, str]:
        """(reason, kind) for a request that ended without a vector."""
        from dsh_memory_mcp.search.embedding import BreakerOpen

        if isinstance(error, BreakerOpen):
            return msg("向量后端最近连续失败,熔断中({error})", error=error), "breaker"
        if isinstance(error, EmbeddingUnavailable):
            return msg("查询嵌入失败({error})", error=error), "failed"
        return msg("查询嵌入出错({name})", name=type(error).__name__), "error"

    def stats(self) -> dict[str, Any]:
        with self._lock:
            recent = list(self._recent)
            return {
                "cached": len(self._cache),
                "in_flight": len(self._in_flight),
                "cache_hits": self.hits,
                "recent_ms": [round(x * 1000, 1) for x in recent],
            }
