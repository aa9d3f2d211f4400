"""``trash.jsonl``: the records a person deleted (the page, the CLI), restorable for a while;
one JSON line per entry (docs/design.md, Trash: its fields, its lock, who writes here). A line that
does not parse as an entry is kept byte for byte and skipped when listing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dsh_memory_mcp.errors import StoreError
from dsh_memory_mcp.store import fileio, records, writing
from dsh_memory_mcp.store.layout import TRASH_FILE, StoreLayout
from dsh_memory_mcp.store.records import Line, Record
from dsh_memory_mcp.texts import msg

DAY_MS = 86_400_000


@dataclass(frozen=True)
class TrashEntry:
    """One deleted record as it was, with where it lived and when (and by whom) it was deleted."""

    record: Record
    scope: str
    trashed_at: int
    client: str | None


def entry_of(line: Line) -> TrashEntry | None:
    """The entry a line of ``trash.jsonl`` holds, or None when it is not a well-formed one."""
    if not isinstance(line, Record):
        return None
    data = line.data
    stored, at, client = data.get("record"), data.get("trashedAt"), data.get("client")
    if not isinstance(stored, dict) or stored.get("id") != line.id or type(at) is not int:
        return None
    return TrashEntry(
        Record(stored, records.dump_line(stored)), line.scope, at, client if isinstance(client, str) else None
    )


class Trash:
    """The trash of one store. `hold` is the store's `LockManager.hold`; `clock` gives ms."""

    def __init__(
        self,
        layout: StoreLayout,
        hold: Callable[[str], contextlib.AbstractContextManager[None]],
        clock: Callable[[], int],
    ) -> None:
        self.path = layout.trash_path
        self._hold = hold
        self._clock = clock

    def _read(self) -> list[Line]:
        """The file's lines ([] when missing). A symlink, FIFO or device is refused, not followed.

        :raises StoreError: it cannot be read.
        """
        try:
            with open(fileio.open_regular(self.path, follow=False), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError(
                msg("无法读取回收站文件 {path}:{why}。请检查或移走该文件。", path=self.path, why=exc.strerror or exc),
                path=self.path,
            ) from exc
        return records.parse_bytes(data)

    def _rewrite(self, change: Callable[[list[Line], int], list[Line]], days: int) -> list[Line]:
        """Under the trash lock: read, drop the entries past `days`, apply `change`, write back when
        anything changed; the lines now in the file."""
        with self._hold(TRASH_FILE):
            lines = self._read()
            now = self._clock()
            kept = [line for line in lines if not self._expired(line, now, days)]
            new = change(kept, now)
            if new != lines:
                writing.replace_file(self.path, writing.encoded_chunks(new))
            return new

    @staticmethod
    def _expired(line: Line, now: int, days: int) -> bool:
        entry = entry_of(line)
        return entry is not None and entry.trashed_at <= now - days * DAY_MS

    def entries(self, days: int) -> list[TrashEntry]:
        """The well-formed entries, newest first, after dropping those past `days`."""
        lines = self._read()
        now = self._clock()
        if any(self._expired(line, now, days) for line in lines):
            lines = self._rewrite(lambda kept, _now: kept, days)
        found = [e for e in map(entry_of, lines) if e is not None]
        found.sort(key=lambda e: (-e.trashed_at, e.record.id))
        return found

    def add(self, removed: Sequence[Record], client: str | None, days: int) -> None:
        """Keep `removed` (with their scope) as entries; an id already in the trash is replaced."""
        if not removed:
            return
        ids = {r.id for r in removed}

        def change(kept: list[Line], now: int) -> list[Line]:
            out = [line for line in kept if (old := entry_of(line)) is None or old.record.id not in ids]
            for record in removed:
                entry: dict[str, Any] = {"id": record.id, "scope": record.scope, "trashedAt": now}
                if client:
                    entry["client"] = client
                entry["record"] = record.data
                out.append(records.parse_line(records.dump_line(entry)))
            return out

        self._rewrite(change, days)

    def remove(self, ids: Iterable[str] | None, days: int) -> list[TrashEntry]:
        """Drop the entries with these full ids (None: every entry; unreadable lines stay); the
        entries dropped."""
        wanted = None if ids is None else set(ids)
        gone: list[TrashEntry] = []

        def change(kept: list[Line], _now: int) -> list[Line]:
            gone.clear()
            out: list[Line] = []
            for line in kept:
                entry = entry_of(line)
                if entry is not None and (wanted is None or entry.record.id in wanted):
                    gone.append(entry)
                else:
                    out.append(line)
            return out

        self._rewrite(change, days)
        return gone
