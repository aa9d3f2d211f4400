"""The vector channel's write queue: embed saved records, append them, drop deleted ones.

A save queues `(scope, id, content)` and returns at once; the worker embeds the queue in batches
and appends to the scope's sidecar. A delete removes the ids' lines inside the store's scope lock.
The queue is not flushed at exit: the next start's backfill embeds what has no vector.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh_memory_mcp.errors import DshMemoryError, EmbeddingUnavailable
from dsh_memory_mcp.store.fileio import NotRegularFile

if TYPE_CHECKING:
    from dsh_memory_mcp.search.backend import Backend
    from dsh_memory_mcp.search.matrices import MatrixCache
    from dsh_memory_mcp.store.shared import SharedStore

#: Saved records embedded per request.
SAVE_BATCH = 32
MAX_PENDING_SAVES = 10_000


class SidecarWriter:
    """Appends vectors to a scope's sidecar; a new or voided file marks the scope for backfill."""

    def __init__(
        self, backend: Backend, store: SharedStore, log: logging.Logger, mark_dirty: Callable[[str], None]
    ) -> None:
        self.backend = backend
        self.store = store
        self.log = log
        self.mark_dirty = mark_dirty

    def write(self, scope: str, entries: list[tuple[str, list[float]]]) -> None:
        """Append `entries` to the scope's sidecar; create or re-head it under the scope lock."""
        from dsh_memory_mcp.search import sidecar

        header = self.backend.header()
        if header is None:
            return
        rows = sidecar.normalised_rows(entries)
        path = self.store.layout.vec_path(scope)
        try:
            if sidecar.append(path, header, rows):
                return
            with self.store.lock(scope):
                current = sidecar.read_header(path)
                if current == header:
                    sidecar.append(path, header, rows)
                    return
                if current is not None:
                    self.log.warning(
                        "vector: %s 的向量文件由 %s/%d 维生成,当前模型是 %s/%d 维:作废并重新嵌入",
                        os.path.basename(path),
                        current[0],
                        current[1],
                        header[0],
                        header[1],
                    )
                sidecar.write(path, header, rows)
            self.mark_dirty(scope)  # a new or voided file: the rest of the scope needs vectors
        except NotRegularFile as exc:
            # A FIFO or device in place of the sidecar: unusable until someone replaces it. Not
            # marked dirty, or the backfill would embed this scope again and again in a loop.
            sidecar.warn_unusable(path, exc)
        except (OSError, DshMemoryError) as exc:
            # LockTimeout, disk full…: the vectors are lost, the backfill will try again.
            self.log.warning("vector: 写入 %s 失败:%s", path, exc)
            self.mark_dirty(scope)


class WriteQueue:
    """Saved records waiting for their embedding, and the delete hook."""

    def __init__(self, backend: Backend, cache: MatrixCache, writer: SidecarWriter, log: logging.Logger) -> None:
        self.backend = backend
        self.cache = cache
        self.writer = writer
        self.log = log
        self.pending: deque[tuple[str, str, str]] = deque(maxlen=MAX_PENDING_SAVES)
        #: A batch taken off `pending` is being embedded and written.
        self.busy = False

    def __len__(self) -> int:
        return len(self.pending) + self.busy

    def add(self, scope: str, rid: str, content: str) -> None:
        self.pending.append((scope, rid, content))

    def step(self) -> bool:
        """Embed and append one batch of queued saves; False when the queue is empty."""
        self.busy = True
        try:
            return self._step()
        finally:
            self.busy = False

    def _step(self) -> bool:
        batch: list[tuple[str, str, str]] = []
        while self.pending and len(batch) < SAVE_BATCH:
            try:
                batch.append(self.pending.popleft())
            except IndexError:
                break
        if not batch:
            return False
        # The backfill may have got there first (it saw the record before record_saved queued
        # it): skip what the sidecar already holds rather than append a duplicate line.
        header = self.backend.header()
        for scope in {scope for scope, _, _ in batch}:
            sv = self.cache.get(scope)
            with sv.lock:
                have = sv.held(header)
                batch = [item for item in batch if item[0] != scope or item[1] not in have]
        if not batch:
            return True
        try:
            vectors = self.backend.embed([text for _, _, text in batch])
        except EmbeddingUnavailable as exc:
            self.pending.extendleft(reversed(batch))
            self.backend.embedding_failed(exc)
            return True
        by_scope: dict[str, list[tuple[str, list[float]]]] = {}
        for (scope, rid, _), vec in zip(batch, vectors, strict=True):
            by_scope.setdefault(scope, []).append((rid, vec))
        for scope, entries in by_scope.items():
            self.writer.write(scope, entries)
        return True

    def on_delete(self, scope: str, ids: list[str]) -> None:
        """Drop `ids` from the scope's sidecar; runs inside the scope lock (the store's callback).

        Local file work only (no network), and never raises: the JSONL delete already happened.
        """
        try:
            from dsh_memory_mcp.search import sidecar

            sv = self.cache.get(scope)
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
            self.log.warning("vector: 从 %s 的向量文件删除 %d 条向量失败", scope, len(ids), exc_info=True)
