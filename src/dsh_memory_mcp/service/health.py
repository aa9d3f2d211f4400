"""The store's numbers for people: records, expired, corrupt lines, vectors per scope (CLI stats, web page).

Read-only and cheap enough for a page that asks every few seconds: the store's cached snapshots, and
``.vec`` files read as text (no numpy).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.layout import vec_path_for

if TYPE_CHECKING:
    from dsh_memory_mcp.store.shared import SharedStore

#: The per-scope counts `store_stats` sums into its totals.
TOTAL_KEYS = ("records", "live", "expired", "corrupt", "bytes")


def scope_stats(store: SharedStore, scope: str, now: int) -> dict[str, Any]:
    """Counts of one scope file and its sidecar (``sidecar`` None when there is no ``.vec``)."""
    snap = store.snapshot(scope)
    live_ids = {r.id for r in snap.records if not r.is_expired(now)}
    expired = sum(1 for r in snap.records if r.is_expired(now))
    try:
        size = os.path.getsize(snap.path)
    except OSError:
        size = 0
    vec_path = vec_path_for(snap.path)
    return {
        "scope": scope,
        "file": store.layout.relpath(snap.path),
        "records": len(snap.records),
        "live": len(snap.records) - expired,
        "expired": expired,
        "corrupt": len(snap.lines) - len(snap.records),
        "bytes": size,
        "sidecar": sidecar_stats(store, vec_path, live_ids),
    }


def sidecar_stats(store: SharedStore, path: str, live_ids: set[str]) -> dict[str, Any] | None:
    """Header and counts of a ``.vec`` file, read as text (no numpy): None when there is none."""
    file = store.layout.relpath(path)
    try:
        with open(fileio.open_regular(path), "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"file": file, "bytes": 0, "model": None, "dims": None, "vectors": 0, "covered": 0, "error": str(exc)}
    lines = data[: data.rfind(b"\n") + 1].split(b"\n")
    model: str | None = None
    dims: int | None = None
    head = lines[0].decode("utf-8", "replace") if lines else ""
    name, tab, width = head[1:].partition("\t") if head.startswith("#") else ("", "", "")
    if tab and name and width.strip().isdigit():
        model, dims = name, int(width)
    ids = {ln.partition(b"\t")[0].decode("utf-8", "replace") for ln in lines[1:] if b"\t" in ln and ln[:1] != b"#"}
    return {
        "file": file,
        "bytes": len(data),
        "model": model,
        "dims": dims,
        "vectors": len(ids) if model is not None else 0,
        "covered": len(ids & live_ids) if model is not None else 0,
    }


def store_stats(store: SharedStore, wanted: Sequence[str], now: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """`scope_stats` of each scope and their totals (plus ``vectors``, ``covered``, ``scopes``)."""
    rows = [scope_stats(store, scope, now) for scope in wanted]
    totals = {key: sum(int(row[key]) for row in rows) for key in TOTAL_KEYS}
    totals["vectors"] = sum(int(row["sidecar"]["vectors"]) for row in rows if row["sidecar"])
    totals["covered"] = sum(int(row["sidecar"]["covered"]) for row in rows if row["sidecar"])
    totals["scopes"] = len(rows)
    return rows, totals


def store_version(store: SharedStore) -> str:
    """A short hash of the identities of the store's scope files and alias file: every write by any
    process changes one of them; nothing is read, one listing and one stat per file."""
    layout = store.layout
    entries: list[tuple[str, int, int, int]] = []
    for rel in [*layout.scope_files(), layout.relpath(layout.aliases_path)]:
        try:
            st = os.stat(layout.abspath(rel))
        except OSError:
            continue
        entries.append((rel, st.st_ino, st.st_size, st.st_mtime_ns))
    return hashlib.sha1(repr(entries).encode("utf-8")).hexdigest()[:16]
