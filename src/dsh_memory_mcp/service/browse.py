"""Browsing a store for people (the web page): filters, sorts, paging, facets, per-day activity.

Read-only, over the store's cached snapshots, with the tools' own rules for what a scope means and
how a search ranks (`MemoryService.read_scopes`, `MemoryService.ranked`). Dates are the caller's
local days: ``tz_minutes`` is the offset east of UTC (a browser's ``-getTimezoneOffset()``).
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from dsh_memory_mcp.errors import InvalidArgument
from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.service.render import RESULT_CONTENT_CHARS, client_of, record_dict
from dsh_memory_mcp.store import records as _records
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.snapshots import WRITERS_KEY, WRITERS_PREVIOUS_KEY
from dsh_memory_mcp.texts import msg

if TYPE_CHECKING:
    from dsh_memory_mcp.service.tools import MemoryService
    from dsh_memory_mcp.store.journal import Entry
    from dsh_memory_mcp.store.shared import SharedStore
    from dsh_memory_mcp.store.snapshots import ScopeSnapshot

#: The client key of records no client wrote (saved by hand: the CLI, a script, another program).
MANUAL = "-"
#: Sort orders a person can pick; searches also have "relevance" (the tools' ranking).
SORTS = ("updated", "oldest", "importance", "access")
#: The most search hits a page may walk through (the tool itself returns at most 20).
SEARCH_MAX = 200
#: Days of per-day activity shown per scope.
ACTIVITY_DAYS = 30
DAY_MS = 86_400_000
TZ_MINUTES_MAX = 14 * 60


@dataclass(frozen=True)
class Filters:
    """What a person narrowed the view to; None = no restriction. Dates bound ``updatedAt`` (ms)."""

    kind: str | None = None
    tag: str | None = None
    client: str | None = None
    since: int | None = None
    until: int | None = None

    def match(self, record: Record, writer: Writer) -> bool:
        if self.kind is not None and record.kind != self.kind:
            return False
        if self.since is not None and record.updated_at < self.since:
            return False
        if self.until is not None and record.updated_at >= self.until:
            return False
        if self.tag is not None and self.tag.casefold() not in {t.casefold() for t in record.tags}:
            return False
        return self.client is None or writer.key == self.client


@dataclass(frozen=True)
class Page:
    """One page of a listing: the records shown, how many match in all, and search scores."""

    records: list[Record]
    total: int
    scores: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Writer:
    """Who wrote a record: `key` is what a client filter compares (the client's name folded, or
    `MANUAL`), `name` the name as written (``claude-code``), `full` the whole ``source.client``."""

    key: str
    name: str | None
    full: str | None


_BY_HAND = Writer(MANUAL, None, None)


def writer_of(record: Record) -> Writer:
    """`Writer` of one record (parses its line: use `writers` for a whole snapshot)."""
    return _writer(client_of(record))


def _writer(full: str | None) -> Writer:
    """The `Writer` a ``name/version`` client string names (`MANUAL` when it names none)."""
    name = full.partition("/")[0].strip() if full is not None else ""
    if not name:
        return _BY_HAND
    return Writer(sys.intern(name.casefold()), sys.intern(name), sys.intern(full or name))


def writers(snapshot: ScopeSnapshot) -> tuple[Writer, ...]:
    """The `Writer` of each of the snapshot's records (same order), kept in the snapshot's cache;
    rows shared with the previous version's table (`snapshots.carry_forward`) are not parsed again."""
    cache = snapshot.cache
    records = snapshot.records
    cached = cache.get(WRITERS_KEY)
    if isinstance(cached, tuple) and len(cached) == 2 and cached[0] is records:
        return cast("tuple[Writer, ...]", cached[1])
    previous = cache.pop(WRITERS_PREVIOUS_KEY, None)
    rows: tuple[Writer, ...]
    if isinstance(previous, tuple) and len(previous) == 2:
        old_records, old_rows = previous
        n = len(old_records)
        if n <= len(records) and all(a is b for a, b in zip(old_records, records, strict=False)):
            rows = old_rows + tuple(writer_of(r) for r in records[n:])  # an append: only the tail is new
        else:
            known = {r: row for r, row in zip(old_records, old_rows, strict=True)}  # records hash by their bytes
            rows = tuple(known.get(r) or writer_of(r) for r in records)
    else:
        rows = tuple(writer_of(r) for r in records)
    cache[WRITERS_KEY] = (records, rows)
    return rows


def live_records(store: SharedStore, scopes: Iterable[str], now: int) -> list[tuple[Record, Writer]]:
    """The live records of `scopes` with their writers, each id once (the first scope that has it)."""
    found: dict[str, tuple[Record, Writer]] = {}
    for scope in scopes:
        snap = store.snapshot(scope)
        for record, writer in zip(snap.records, writers(snap), strict=True):
            if not record.is_expired(now):
                found.setdefault(record.id, (record, writer))
    return list(found.values())


def _sort_key(sort: str) -> Any:
    if sort == "oldest":
        return lambda r: (r.updated_at, r.id)
    if sort == "importance":
        return lambda r: (-(r.importance if r.importance is not None else -1.0), -r.updated_at, r.id)
    if sort == "access":
        return lambda r: (-r.access_count, -r.updated_at, r.id)
    return lambda r: (-r.updated_at, r.id)  # "updated": the tools' own order (newest first)


def _check_sort(sort: str, *, relevance: bool) -> str:
    allowed = (*SORTS, "relevance") if relevance else SORTS
    if sort not in allowed:
        raise InvalidArgument(
            msg("sort 必须是 {value} 之一(收到 {sort!r})。", value=" / ".join(allowed), sort=sort), code="SORT_INVALID"
        )
    return sort


def browse(
    store: SharedStore,
    scopes: Sequence[str],
    filters: Filters,
    *,
    sort: str = "updated",
    offset: int = 0,
    limit: int = 100,
    now: int,
) -> Page:
    """The live records of `scopes` that pass `filters`, sorted, from `offset`, at most `limit`."""
    _check_sort(sort, relevance=False)
    found = [r for r, w in live_records(store, scopes, now) if filters.match(r, w)]
    found.sort(key=_sort_key(sort))
    return Page(found[offset : offset + limit], len(found), {})


def search(
    service: MemoryService,
    query: str,
    scopes: Sequence[str],
    filters: Filters,
    *,
    sort: str = "relevance",
    offset: int = 0,
    limit: int = 20,
) -> Page:
    """`memory_search`'s ranking (up to `SEARCH_MAX` hits), then `filters` and `sort`; counts no access."""
    _check_sort(sort, relevance=True)
    hits = [h for h in service.ranked(query, scopes, top_k=SEARCH_MAX) if filters.match(h.record, writer_of(h.record))]
    ordered = [h.record for h in hits]
    if sort != "relevance":
        ordered.sort(key=_sort_key(sort))
    return Page(ordered[offset : offset + limit], len(ordered), {h.record.id: h.score for h in hits})


def facets(records: Iterable[tuple[Record, Writer]]) -> dict[str, Any]:
    """Kinds, tags and clients of `records` with their counts (most common first), for filter menus."""
    kinds: dict[str, int] = {}
    tags: dict[str, list[Any]] = {}
    clients: dict[str, list[Any]] = {}
    for record, writer in records:
        kinds[record.kind] = kinds.get(record.kind, 0) + 1
        for tag in set(record.tags):
            entry = tags.setdefault(tag.casefold(), [tag, 0])
            entry[1] += 1
        entry = clients.setdefault(writer.key, [writer.name or "", 0])
        entry[1] += 1

    def ranked(table: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
        rows = [{"key": key, "name": name, "count": count} for key, (name, count) in table.items()]
        return sorted(rows, key=lambda row: (-row["count"], row["key"]))

    return {
        "kinds": dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
        "tags": ranked(tags),
        "clients": ranked(clients),
    }


def check_tz(tz_minutes: int) -> int:
    if not -TZ_MINUTES_MAX <= tz_minutes <= TZ_MINUTES_MAX:
        raise InvalidArgument(
            msg("tz 必须是 -840~840 之间的分钟数(收到 {tz_minutes})。", tz_minutes=tz_minutes), code="TZ_INVALID"
        )
    return tz_minutes


def _day(ms: int, tz_minutes: int) -> int:
    return (ms + tz_minutes * 60_000) // DAY_MS


def _date(day: int) -> str:
    return (_dt.date(1970, 1, 1) + _dt.timedelta(days=day)).isoformat()


def day_bounds(date: str, tz_minutes: int) -> tuple[int, int]:
    """``YYYY-MM-DD`` in the caller's time zone → [start, end) in ms since the epoch."""
    try:
        day = (_dt.date.fromisoformat(date.strip()) - _dt.date(1970, 1, 1)).days
    except ValueError:
        raise InvalidArgument(msg("日期必须写成 YYYY-MM-DD(收到 {date!r})。", date=date), code="DATE_INVALID") from None
    start = day * DAY_MS - check_tz(tz_minutes) * 60_000
    return start, start + DAY_MS


def activity(store: SharedStore, scopes: Sequence[str], *, now: int, tz_minutes: int = 0) -> list[dict[str, Any]]:
    """Per scope (each counting its own file): live memories saved (``updatedAt``) per day over the
    last `ACTIVITY_DAYS` days, by client, and all its live memories by kind."""
    check_tz(tz_minutes)
    today = _day(now, tz_minutes)
    first = today - ACTIVITY_DAYS + 1
    out = []
    for scope in scopes:
        per_client: dict[str, list[Any]] = {}
        kinds: dict[str, int] = {}
        live = 0
        snap = store.snapshot(scope)
        for record, writer in zip(snap.records, writers(snap), strict=True):
            if record.is_expired(now):
                continue
            live += 1
            kinds[record.kind] = kinds.get(record.kind, 0) + 1
            day = _day(record.updated_at, tz_minutes)
            if first <= day <= today:
                entry = per_client.setdefault(writer.key, [writer.name or "", [0] * ACTIVITY_DAYS])
                entry[1][day - first] += 1
        clients = [
            {"key": key, "name": name, "counts": counts, "total": sum(counts)}
            for key, (name, counts) in per_client.items()
        ]
        clients.sort(key=lambda row: (-row["total"], row["key"]))
        out.append(
            {
                "scope": scope,
                "days": [_date(d) for d in range(first, today + 1)],
                "clients": clients,
                "kinds": dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
                "live": live,
                "recent": sum(row["total"] for row in clients),
            }
        )
    return out


def highlight_terms(query: str) -> list[str]:
    """What to mark in a search's results: the query's tokens as the search index sees them
    (words, compound parts, CJK bigrams), without stop words and single CJK characters unless the
    query has nothing else, plus each word as typed; longest first."""
    tokens = list(dict.fromkeys(scoring.tokenize(query)))
    strong = [t for t in tokens if not scoring.is_weak_token(t) and not scoring.is_stop_word(t)]
    terms = set(strong or tokens)
    terms.update(
        word
        for word in query.split()
        if len(word) > 1 and scoring.query_has_tokens(word) and not scoring.is_stop_word(word.casefold())
    )
    return sorted(terms, key=lambda t: (-len(t), t))[:64]


def card(record: Record, *, score: float | None = None) -> dict[str, Any]:
    """A record as the page shows it: the tools' record dict (content cut like theirs) plus who
    wrote it, when it was created and last used, and what it replaced."""
    out = record_dict(record, score=score, max_chars=RESULT_CONTENT_CHARS)
    data = record.data
    out.update(createdAt=record.created_at, lastAccessedAt=record.last_accessed_at, accessCount=record.access_count)
    source = data.get("source")
    out["source"] = source if isinstance(source, dict) else None
    who = writer_of(record)
    out["client"] = {"key": who.key, "name": who.name, "full": who.full}
    supersedes = data.get("supersedes")
    out["supersedes"] = supersedes if isinstance(supersedes, str) else None
    edited = data.get("editedBy")
    if isinstance(edited, dict):
        client = edited.get("client")
        editor = _writer(client if isinstance(client, str) else None)
        out["editedBy"] = {"key": editor.key, "name": editor.name}
    if record.expired_at is not None:
        out["expiredAt"] = record.expired_at
    return out


def recover_entries(found: Mapping[str, Sequence[Entry]]) -> list[dict[str, Any]]:
    """`SharedStore.recover`'s answer (what it restored, or would) as rows a person can read."""
    rows = []
    for scope, entries in found.items():
        for entry in entries:
            parsed = _records.parse_line(entry.line)
            content = parsed.content if isinstance(parsed, Record) else ""
            rows.append(
                {"scope": scope, "id": entry.id, "shortId": entry.id[:8], "content": content[:200], "at": entry.at}
            )
    return rows
