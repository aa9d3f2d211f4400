"""The composition root: one place that wires a store, a vector channel and the service together,
for every front door (the stdio server, the HTTP server, the human subcommands). Transport-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.service.tools import MemoryService

if TYPE_CHECKING:
    from dsh_memory_mcp.search.vectors import VectorChannel


def open_service(settings: Settings, *, prepare: bool = True, read_only: bool = False) -> MemoryService:
    """The store and, when `settings.vector.enabled`, a vector channel (not started), wired together.

    :param prepare: create and check the store directory (the server; write commands). Read-only
        commands pass False so that looking at a store that does not exist creates nothing.
    :param read_only: the vector channel writes nothing under the store (no backfill, no sidecar
        writes, calibration kept in memory): the human read commands (search, list, get…).
    :raises StoreError: `prepare` and the store directory cannot be created or written.
    """
    from dsh_memory_mcp.store.shared import SharedStore

    channel: VectorChannel | None = None

    def on_delete(scope: str, ids: list[str]) -> None:
        # Runs inside the scope lock, after the JSONL rewrite: the sidecar follows the records.
        if channel is not None:
            channel.on_delete(scope, ids)

    store = SharedStore(settings.store_dir, on_delete=on_delete, touch_interval=settings.touch_interval)
    if prepare:
        store.prepare()
    if settings.vector.enabled:
        from dsh_memory_mcp.search.vectors import VectorChannel

        channel = VectorChannel(settings.vector, store, read_only=read_only)
    return MemoryService(settings=settings, store=store, vectors=channel)


def close_service(service: MemoryService) -> None:
    """Stop what the channel spawned and flush pending touches; safe to call twice."""
    try:
        if service.vectors is not None:
            service.vectors.close()
    finally:
        service.store.close()
