"""A memory's history for people: its versions, and the edits, restores and moves that extend it.

One mechanism: every change a person makes to a memory (the page's edit, restore and move, the
CLI's ``edit``, ``save --supersedes`` and ``move``) is `memory_save` with ``supersedes`` — a new
record that hides the old one, which stays on disk. The store carries the memory's ``createdAt``,
use count and original ``source`` into the new record (`store.records.new_record`'s ``prior``),
and ``supersedes`` links each version to the one before: `versions` walks that chain back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.render import ToolResult, error_result
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.service.validate import PREFIX_MIN
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.texts import msg

#: How far back `versions` walks (a chain longer than this is cut; a loop ends it).
VERSIONS_MAX = 50
#: The fields an edit may change; the others come from the version edited.
EDITABLE = ("content", "kind", "tags", "importance")


def find_one(service: MemoryService, ident: str) -> Record | None:
    """The record with this id (or unique ≥ 8-character prefix), expired ones included."""
    ident = ident.strip()
    if len(ident) < PREFIX_MIN:
        return None
    found = {r.id: r for r in service.store.find([ident]).get(ident, [])}
    if ident in found:
        return found[ident]
    return next(iter(found.values())) if len(found) == 1 else None


def versions(service: MemoryService, record: Record) -> list[Record]:
    """`record` then the versions it replaced, newest first (``supersedes`` walked back); after a
    version that kept one of a group of near-duplicates, the others it replaced (its ``merged``)."""
    out = [record]
    seen = {record.id}
    head = record
    while len(out) < VERSIONS_MAX:
        data = head.data
        merged = data.get("merged")
        for other in merged if isinstance(merged, list) else ():
            hits = service.store.find([other]).get(other, []) if isinstance(other, str) else []
            if hits and hits[0].id not in seen:
                seen.add(hits[0].id)
                out.append(hits[0])
        prior = data.get("supersedes")
        if not isinstance(prior, str) or not prior or prior in seen:
            break
        hits = service.store.find([prior]).get(prior, [])
        if not hits:
            break
        seen.add(hits[0].id)
        head = hits[0]
        out.append(head)
    return out


def revise(
    service: MemoryService, ident: str, changes: Mapping[str, Any], ctx: CallContext, *, scope: str | None = None
) -> tuple[Record | None, ToolResult]:
    """A new version of the live memory `ident`: `changes` (any of `EDITABLE`) over its fields, in
    `scope` (a move) or its own; `memory_save` with ``supersedes`` (same checks, codes, history).
    ``GONE`` when no single record has that id (forgotten meanwhile) or it was replaced.
    """
    found = find_one(service, ident)
    if found is None or found.is_expired(service.clock()):
        return found, error_result("GONE", msg("这条记忆已被删除或已被别处的修改取代:请刷新后再编辑。"))
    args: dict[str, Any] = {key: changes[key] if key in changes else getattr(found, key) for key in EDITABLE}
    args["scope"] = found.scope if scope is None else scope
    args["supersedes"] = found.id
    return found, service.call("memory_save", args, ctx)
