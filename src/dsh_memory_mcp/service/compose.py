"""The composition root: one place that wires a store, a vector channel and the service together,
for every front door (the stdio server, the HTTP server, the human subcommands). Transport-free.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from dsh_memory_mcp.config import DIRECT_LIMIT, Settings
from dsh_memory_mcp.service.tools import MemoryService

if TYPE_CHECKING:
    from dsh_memory_mcp.search.vectors import VectorChannel
    from dsh_memory_mcp.store.foreground import Foreground
    from dsh_memory_mcp.store.snapshots import ScopeSnapshot

log = logging.getLogger("dsh_memory_mcp.service.compose")


def open_service(settings: Settings, *, prepare: bool = True, read_only: bool = False, warm: str = "") -> MemoryService:
    """The store and, when `settings.vector.enabled`, a vector channel (not started), wired together.

    :param prepare: create and check the store directory; False: looking at a missing store creates nothing.
    :param read_only: the vector channel writes nothing under the store (the human read commands).
    :param warm: ``"default"`` (a stdio server, which also warns past `config.DIRECT_LIMIT`) or ``"all"``
        (`serve`): `warm_up` those scopes in the background so the first search skips the cold read.
    :raises StoreError: `prepare` and the store directory cannot be created or written.
    """
    from dsh_memory_mcp.store.shared import SharedStore

    channel: VectorChannel | None = None

    def on_delete(scope: str, ids: list[str]) -> None:
        # Runs inside the scope lock, after the JSONL rewrite: the sidecar follows the records.
        if channel is not None:
            channel.on_delete(scope, ids)

    store = SharedStore(
        settings.store_dir,
        on_delete=on_delete,
        touch_interval=settings.touch_interval,
        direct_limit=DIRECT_LIMIT if warm == "default" else None,  # a stdio server: the direct process
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


#: Records tokenised per step of the warm-up's lexical build (~25 ms of CPU), between two pauses.
WARM_CHUNK = 1024


def warm_up(service: MemoryService, *, every_scope: bool = False) -> threading.Thread:
    """Read scopes and build their lexical indexes in a daemon thread (the server's start).

    It pauses for tool calls (`service.foreground`) before each scope and between the pieces of a
    read or an index build, so a lock holder never shares the GIL with it, and holds no lock across
    a pause: a call reads on, or extends the chunks built so far. Failures are only logged.
    """

    def run() -> None:
        from dsh_memory_mcp.service.context import default_context
        from dsh_memory_mcp.service.scoping import ScopeResolver
        from dsh_memory_mcp.store import snapshots

        fg = service.foreground
        try:
            ctx = default_context(service.settings)
            resolver = ScopeResolver(service.store, ctx, scope_all=service.settings.scope_all)
            write = resolver.write_scope(None, None)
            scopes = list(dict.fromkeys([write, *resolver.read_scopes(None, None)]))
            if every_scope:
                scopes = list(dict.fromkeys([*scopes, *service.store.discover_scopes()]))
            # What a save needs first (its default scope's dedupe index), then each scope in turn.
            fg.pause()
            snap = service.store.snapshot(write, yield_to=fg)
            fg.pause()
            snapshots.content_index(snap)
            for scope in scopes:
                started = time.monotonic()
                snap, steps = _index_in_steps(functools.partial(service.store.snapshot, scope, yield_to=fg), fg)
                log.debug(
                    "warm-up: %d records of %s indexed in %d steps, %.2f s",
                    len(snap.records),
                    scope,
                    steps,
                    time.monotonic() - started,
                )
            log.debug("warm-up: done (paused %d times for calls)", fg.stats["pauses"])
        except Exception as exc:  # the call that needs the scope reports it properly
            log.debug("warm-up stopped: %s", exc)

    thread = threading.Thread(target=run, name="dsh-memory-warm-up", daemon=True)
    thread.start()
    return thread


def _index_in_steps(current: Callable[[], ScopeSnapshot], fg: Foreground) -> tuple[ScopeSnapshot, int]:
    """`scoring.index_for` of the scope's newest version (`current()`), built `WARM_CHUNK` records at
    a time with a pause between; the version indexed and the steps taken. Each chunk's index is kept
    where `index_for` looks for a previous version's, so a call extends what was built so far.
    """
    from dsh_memory_mcp.search import scoring
    from dsh_memory_mcp.store.snapshots import Rows

    steps = 0
    mine: scoring.LexicalIndex | None = None  # the longest prefix built here
    while True:
        fg.pause()
        snap = current()
        cache, records = snap.cache, snap.records
        if not isinstance(records, Rows) or len(records) <= WARM_CHUNK:
            break
        with cache.setdefault(scoring.BUILD_LOCK_KEY, threading.Lock()):
            built = cache.get(scoring.CACHE_KEY)
            if isinstance(built, scoring.LexicalIndex) and built.source is records:
                return snap, steps  # a call built it meanwhile
            previous = cache.get(scoring.PREVIOUS_CACHE_KEY)
            if (
                mine is not None
                and records.starts_with(mine.records)
                and (not isinstance(previous, scoring.LexicalIndex) or len(previous) < len(mine))
            ):
                previous = mine  # this version was made (a save) before our last chunk
            if isinstance(previous, scoring.LexicalIndex):
                if not records.starts_with(previous.records):
                    break  # an older version's index, rewritten since: index_for decides
            else:
                previous = None
            done = len(previous) if previous is not None else 0
            if done + WARM_CHUNK >= len(records):
                cache[scoring.PREVIOUS_CACHE_KEY] = previous
                break
            mine = scoring.LexicalIndex.build(records.prefix(done + WARM_CHUNK), previous)
            cache[scoring.PREVIOUS_CACHE_KEY] = mine
            steps += 1
    fg.pause()
    snap = current()
    scoring.index_for(snap)
    return snap, steps + 1


def close_service(service: MemoryService) -> None:
    """Stop what the channel spawned, flush pending touches; safe to call twice."""
    try:
        if service.vectors is not None:
            service.vectors.close()
    finally:
        service.store.close()
