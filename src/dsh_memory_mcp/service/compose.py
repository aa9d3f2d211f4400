"""The composition root: one place that wires a store, a vector channel and the service together,
for every front door (the stdio server, the HTTP server, the human subcommands). Transport-free.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.service.tools import MemoryService

if TYPE_CHECKING:
    from dsh_memory_mcp.search.vectors import VectorChannel

log = logging.getLogger("dsh_memory_mcp.service.compose")


def open_service(
    settings: Settings, *, prepare: bool = True, read_only: bool = False, warm: str = ""
) -> MemoryService:
    """The store and, when `settings.vector.enabled`, a vector channel (not started), wired together.

    :param prepare: create and check the store directory (the server; write commands). Read-only
        commands pass False so that looking at a store that does not exist creates nothing.
    :param read_only: the vector channel writes nothing under the store (no backfill, no sidecar
        writes, calibration kept in memory): the human read commands (search, list, get…).
    :param warm: ``"default"`` (a stdio server: the scopes a bare search reads) or ``"all"``
        (`serve`: every scope on disk): read them and build their indexes in a background
        thread from now on, so the first search does not pay for the cold read (`warm_up`).
    :raises StoreError: `prepare` and the store directory cannot be created or written.
    """
    from dsh_memory_mcp.store.shared import SharedStore

    channel: VectorChannel | None = None

    def on_delete(scope: str, ids: list[str]) -> None:
        # Runs inside the scope lock, after the JSONL rewrite: the sidecar follows the records.
        if channel is not None:
            channel.on_delete(scope, ids)

    from dsh_memory_mcp.search.index_cache import IndexCache

    derived = IndexCache(settings.store_dir, read_only=read_only or not prepare)
    store = SharedStore(
        settings.store_dir, on_delete=on_delete, touch_interval=settings.touch_interval, derived=derived
    )
    if prepare:
        store.prepare()
    if settings.vector.enabled:
        from dsh_memory_mcp.search.vectors import VectorChannel

        channel = VectorChannel(settings.vector, store, read_only=read_only)
    service = MemoryService(settings=settings, store=store, vectors=channel)
    if warm:
        warm_up(service, every_scope=warm == "all")
    return service


def warm_up(service: MemoryService, *, every_scope: bool = False) -> threading.Thread:
    """Read scopes and build their lexical indexes in a daemon thread (the server's start).

    A request that needs one of them meanwhile waits for the same read and build instead of
    starting its own (`SnapshotCache.load`, `scoring.index_for`). Failures are only logged: the
    request that needs the scope will report them.
    """

    def run() -> None:
        from dsh_memory_mcp.search import scoring
        from dsh_memory_mcp.service.context import default_context
        from dsh_memory_mcp.service.scoping import ScopeResolver

        try:
            ctx = default_context(service.settings)
            scopes = ScopeResolver(service.store, ctx, scope_all=service.settings.scope_all).read_scopes(None, None)
            if every_scope:
                scopes = list(dict.fromkeys([*scopes, *service.store.discover_scopes()]))
            for scope in scopes:
                started = time.monotonic()
                snap = service.store.snapshot(scope)
                scoring.index_for(snap)
                log.debug("warm-up: %d records of %s in %.2f s", len(snap.records), scope, time.monotonic() - started)
        except Exception as exc:  # the call that needs the scope reports it properly
            log.debug("warm-up stopped: %s", exc)

    thread = threading.Thread(target=run, name="dsh-memory-warm-up", daemon=True)
    thread.start()
    return thread


def close_service(service: MemoryService) -> None:
    """Stop what the channel spawned, flush pending touches, save due index caches; safe to call twice."""
    try:
        if service.vectors is not None:
            service.vectors.close()
    finally:
        try:
            service.store.close()
        finally:
            derived = service.store.derived
            if derived is not None and hasattr(derived, "close"):
                derived.close()
