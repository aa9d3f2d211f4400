"""Memory that reaches the model unasked: the `instructions` text returned at `initialize`.

Hosts put `instructions` into the system prompt, so a bounded digest of the standing memories of
global and the current project (rules, preferences, decisions, importance ≥ 0.8; never an expired
record) reaches the model without a `memory_search`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp import config
from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.scopes import GLOBAL
from dsh_memory_mcp.store.snapshots import identity_of

if TYPE_CHECKING:
    from dsh_memory_mcp.store.shared import SharedStore

USAGE = (
    "dsh-memory-mcp is the user's long-term memory, shared by every IDE and agent they use. "
    "Before answering questions about the user's preferences, conventions, projects or past decisions, "
    "call memory_search (Chinese or English keywords). When the user states something durable — a "
    "preference, a decision, a convention, a procedure, a fact about their setup — save it with memory_save "
    "as one self-contained sentence. Use memory_get with 8-char ids for full text; memory_forget removes "
    "outdated memories (or pass supersedes when saving the replacement)."
)

STANDING_KINDS = frozenset({"rule", "preference", "decision"})
IMPORTANT = 0.8
#: The digest's budget in characters (header and lines included), on top of `USAGE`.
DIGEST_CHARS = 1500
#: One memory's line is cut here so that one long memory cannot fill the digest.
LINE_CHARS = 200
log = logging.getLogger("dsh_memory_mcp.service.digest")
_HEADER = "用户的长期记忆摘要(规则、偏好、决定与重要记忆,按重要度和使用次数排序;完整内容用 memory_get 传 id):"


def _rank(record: Record) -> tuple[float, int, int, str]:
    importance = record.importance if record.importance is not None else 0.5
    return (-importance, -record.access_count, -record.updated_at, record.id)


def standing(records: Iterable[Record], now: int) -> list[Record]:
    """The standing memories among `records`, most important, most used, newest first."""
    keep = [
        r
        for r in records
        if not r.is_expired(now)
        and (r.kind in STANDING_KINDS or (r.importance is not None and r.importance >= IMPORTANT))
    ]
    keep.sort(key=_rank)
    return keep


def _line(record: Record, project: str | None) -> str:
    where = "项目" if project is not None and record.scope == project else "global"
    text = " ".join(record.content.split())
    if len(text) > LINE_CHARS:
        text = text[: LINE_CHARS - 1] + "…"
    return f"- [{where}·{record.kind}] {text} (id {record.short_id})"


def _scopes(project: str | None) -> list[str]:
    return [GLOBAL] if project is None or project == GLOBAL else [project, GLOBAL]


def digest_text(store: SharedStore, project: str | None, now: int) -> str:
    """The digest of global and `project` (a scope key, or None for global only); "" when empty."""
    return _digest(store, project, now)[0]


def _digest(store: SharedStore, project: str | None, now: int) -> tuple[str, int | None]:
    """(digest text, the first future `expiredAt` among the records read, after which it is stale)."""
    records: dict[str, Record] = {}  # each id once: the first scope that has it
    for scope in _scopes(project):
        for record in store.snapshot(scope).records:
            records.setdefault(record.id, record)
    future = [r.expired_at for r in records.values() if r.expired_at is not None and r.expired_at >= now]
    return _render(standing(records.values(), now), project), (min(future) if future else None)


def _render(ranked: list[Record], project: str | None) -> str:
    if not ranked:
        return ""
    lines = [_HEADER]
    used = len(_HEADER)
    shown = 0
    for record in ranked:
        line = _line(record, project)
        if used + 1 + len(line) > DIGEST_CHARS - 40:  # keep room for the "more" line
            break
        lines.append(line)
        used += 1 + len(line)
        shown += 1
    if shown < len(ranked):
        lines.append(f"(另有 {len(ranked) - shown} 条未列出,可用 memory_list kind=rule 等查看)")
    return "\n".join(lines)


def instructions(digest: str) -> str:
    """The `initialize` instructions: the usage guidance, then the digest when there is one."""
    return USAGE if not digest else f"{USAGE}\n\n{digest}"


class DigestCache:
    """The last digest per (store, project) in `<dir>/<sha1>.json`, valid while the scope files'
    identities are unchanged and no record has expired since: computing one parses global and the
    project, which would delay the `initialize` answer. Best effort: any failure computes it.
    """

    def __init__(self, directory: str | None, store_dir: str) -> None:
        self.directory = directory
        self.store_dir = store_dir

    def _path(self, project: str | None) -> str | None:
        if self.directory is None:
            return None
        key = hashlib.sha1(f"{self.store_dir}\0{project or ''}\0{DIGEST_CHARS}".encode()).hexdigest()
        return os.path.join(self.directory, f"{key}.json")

    def _identities(self, store: SharedStore, project: str | None) -> list[Any]:
        return [list(ident) if (ident := identity_of(store.scope_path(s))) else None for s in _scopes(project)]

    def get(self, store: SharedStore, project: str | None, now: int) -> str:
        """The digest: from the cache when still valid, else computed (and the cache refreshed)."""
        path = self._path(project)
        if path is not None:
            try:
                with open(path, encoding="utf-8") as fh:
                    entry = json.load(fh)
                until = entry.get("validUntil")
                if entry.get("identities") == self._identities(store, project) and (until is None or now < until):
                    return str(entry["text"])
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                pass
        return self.refresh(store, project, now)

    def refresh(self, store: SharedStore, project: str | None, now: int) -> str:
        """Compute the digest and store it with the identities seen before reading."""
        identities = self._identities(store, project)
        text, until = _digest(store, project, now)
        path = self._path(project)
        if path is not None and self.directory is not None:
            entry = {"identities": identities, "validUntil": until, "text": text}
            try:
                fd, tmp = fileio.new_tmp(path)
                fileio.commit(fd, tmp, path, json.dumps(entry, ensure_ascii=False).encode("utf-8"))
            except OSError as exc:
                log.debug("digest cache not written: %s", exc)
        return text


def scrub(removed: Iterable[Record]) -> None:
    """Delete the cached digests (`DigestCache` in `default_cache_dir`) that show one of the `removed`
    records: a forgotten memory's text must not linger in the user's state dir. Best effort."""
    directory = default_cache_dir()
    marks = [f"(id {r.short_id})" for r in removed]
    try:
        names = os.listdir(directory) if directory is not None and marks else []
    except OSError:
        return
    for name in names:
        path = os.path.join(str(directory), name)
        try:
            with open(fileio.open_regular(path, follow=False), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            if any(mark in text for mark in marks):
                os.unlink(path)
        except OSError:
            continue


def default_cache_dir() -> str | None:
    """`<user state dir>/digest` (e.g. `~/.local/state/dsh-memory-mcp/digest`), None if unknown."""
    try:
        return os.path.join(config.user_state_dir(), "digest")
    except Exception:
        return None
