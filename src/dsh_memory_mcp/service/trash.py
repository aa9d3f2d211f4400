"""A person's trash, for every front door (the page, the CLI): list, restore, delete for good.

What a person forgets is kept in `store.trash` for `Settings.trash_days`; a restore is a new save
(journalled like any) that carries the deleted record's history as an edit does (`SharedStore.save`'s
``restored``), then its entry leaves the trash (docs/design.md: Trash).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.service.validate import PREFIX_MIN
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.trash import TrashEntry


@dataclass(frozen=True)
class Restored:
    """A trash entry brought back: the live record now holding it, and whether that is a record
    its scope already had with the same text (`deduped`: nothing new was written)."""

    entry: TrashEntry
    record: Record
    deduped: bool

    def row(self) -> dict[str, Any]:
        """The restore as the page's and ``recover --trash --json``'s answers list it."""
        return {
            "id": self.entry.record.id,
            "restoredAs": self.record.id,
            "scope": self.record.scope,
            "deduped": self.deduped,
        }


def entries(service: MemoryService) -> list[TrashEntry]:
    """What the trash holds, newest first (expired entries purged first)."""
    return service.store.trash.entries(service.settings.trash_days)


def matching(service: MemoryService, keys: Sequence[str]) -> tuple[list[TrashEntry], list[str]]:
    """The entries full ids or unique ≥ 8-character prefixes name, and the keys that name none
    (unknown, too short, or a prefix of several)."""
    found: dict[str, TrashEntry] = {}
    missing: list[str] = []
    every = entries(service)
    for key in keys:
        prefix = key.strip().lower()
        hits = [e for e in every if e.record.id.lower().startswith(prefix)] if len(prefix) >= PREFIX_MIN else []
        exact = [e for e in hits if e.record.id.lower() == prefix]
        hits = exact or hits
        if len(hits) == 1:
            found.setdefault(hits[0].record.id, hits[0])
        else:
            missing.append(key)
    return list(found.values()), missing


def restore(service: MemoryService, keys: Sequence[str], ctx: CallContext) -> tuple[list[Restored], list[str]]:
    """Bring the named entries back into their scopes as live memories with their history
    (created time, use count, first source); the keys that name no entry."""
    found, missing = matching(service, keys)
    out: list[Restored] = []
    for entry in found:
        old = entry.record
        source: dict[str, Any] = {"origin": "explicit"}
        if ctx.client:
            source["client"] = ctx.client
        result = service.store.save(
            entry.scope,
            old.content,
            kind=old.kind,
            tags=old.tags,
            importance=old.importance,
            source=source,
            restored=old,
        )
        if not result.deduped and service.vectors is not None:
            service.vectors.record_saved(entry.scope, result.record)
        service.store.trash.remove([old.id], service.settings.trash_days)
        out.append(Restored(entry, result.record, result.deduped))
    return out, missing


def purge(service: MemoryService, keys: Sequence[str] | None) -> tuple[list[TrashEntry], list[str]]:
    """Delete the named entries for good (None: empty the trash); what went, and the keys that name none."""
    if keys is None:
        return service.store.trash.remove(None, service.settings.trash_days), []
    found, missing = matching(service, keys)
    gone = service.store.trash.remove([e.record.id for e in found], service.settings.trash_days)
    return gone, missing
