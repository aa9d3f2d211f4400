"""Memory that reaches the model unasked: the `instructions` text returned at `initialize`.

Several hosts put a server's `instructions` into the system prompt, so a short digest of the user's
standing memories — rules, preferences, decisions and anything with importance ≥ 0.8, from global
and the current project — reaches the model without a `memory_search`. Bounded (`DIGEST_CHARS`),
most important and most used first, never an expired or superseded record, content as stored.
`DSH_MEMORY_DIGEST=off` leaves the usage guidance alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.scopes import GLOBAL

if TYPE_CHECKING:
    from dsh_memory_mcp.store.shared import SharedStore

__all__ = [
    "DIGEST_CHARS",
    "STANDING_KINDS",
    "USAGE",
    "digest_enabled",
    "digest_text",
    "instructions",
    "standing",
]

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
_HEADER = "用户的长期记忆摘要(规则、偏好、决定与重要记忆,按重要度和使用次数排序;完整内容用 memory_get 传 id):"


def digest_enabled(env: Mapping[str, str]) -> bool:
    """False when `DSH_MEMORY_DIGEST` is off/0/false/no."""
    return env.get("DSH_MEMORY_DIGEST", "").strip().lower() not in ("off", "0", "false", "no")


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


def digest_text(store: SharedStore, project: str | None, now: int, *, limit: int = DIGEST_CHARS) -> str:
    """The digest of global and `project` (a scope key, or None for global only); "" when empty."""
    scopes = [GLOBAL] if project is None or project == GLOBAL else [project, GLOBAL]
    seen: set[str] = set()
    records: list[Record] = []
    for scope in scopes:
        for record in store.snapshot(scope).records:
            if record.id not in seen:
                seen.add(record.id)
                records.append(record)
    ranked = standing(records, now)
    if not ranked:
        return ""
    lines = [_HEADER]
    used = len(_HEADER)
    shown = 0
    for record in ranked:
        line = _line(record, project)
        if used + 1 + len(line) > limit - 40:  # keep room for the "more" line
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
