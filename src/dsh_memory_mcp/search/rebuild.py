"""The vector channel's rebuild: rewrite whole sidecars with one fresh vector per live record.

For the human `reembed` command: every live record with content is embedded again with the
current backend (batches of `SAVE_BATCH`, each retried while the breaker allows, 3 tries), then
the scope's ``.vec`` is rewritten whole under the scope lock (a scope with nothing to embed and
no sidecar gets none).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dsh_memory_mcp.errors import EmbeddingUnavailable
from dsh_memory_mcp.search.writes import SAVE_BATCH
from dsh_memory_mcp.store.records import Record, now_ms
from dsh_memory_mcp.texts import msg

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from dsh_memory_mcp.search.backend import Backend
    from dsh_memory_mcp.search.matrices import MatrixCache
    from dsh_memory_mcp.search.writes import SidecarWriter
    from dsh_memory_mcp.store.shared import SharedStore


def rebuild(
    backend: Backend,
    cache: MatrixCache,
    writer: SidecarWriter,
    store: SharedStore,
    scopes: Sequence[str],
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Rebuild the sidecars of `scopes` with a ready `backend`; the number of vectors written.

    `progress(done, total)` is called before the first batch and after each one.

    :raises EmbeddingUnavailable: embedding keeps failing, or the width changed during the rebuild.
    """
    from dsh_memory_mcp.search import sidecar

    now = now_ms()
    plan: list[tuple[str, list[Record]]] = []
    for scope in scopes:
        live: dict[str, Record] = {}
        for record in store.snapshot(scope).records:
            if record.content and not record.is_expired(now):
                live[record.id] = record
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
        path = store.layout.vec_path(scope)
        if header is None or (not entries and not os.path.exists(path)):
            continue
        rows: list[tuple[str, npt.NDArray[np.float32]]] = []
        if entries:
            normalised = sidecar.l2_normalise([vec for _, vec in entries])
            rows = [(rid, normalised[i]) for i, (rid, _) in enumerate(entries)]
        with store.lock(scope):
            sidecar.write(path, header, rows)
        sv = cache.get(scope)
        with sv.lock:
            sv.reset()
        written += len(rows)
    return written
