"""Tool results as a person at an English terminal reads them, made from their structured data.

The tools' texts are Chinese, written for the model, and the Chinese CLI prints them as they are. Under an
English locale ``list``/``search``/``get``/``forget``/``save`` print these instead: the same facts from the
same ``structuredContent``, in English (not a translation of the tools' text, which is shaped for a model).
Memory content, ids, scopes and paths are shown as they are; coded errors' messages are `texts.Text`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dsh_memory_mcp import texts
from dsh_memory_mcp.cli.output import PROG
from dsh_memory_mcp.service.render import (
    FOR_MODEL,
    PROJECT_SOURCES,
    RESULT_CONTENT_CHARS,
    excerpt,
    meta_line,
    percent,
    project_name,
    snippet,
    source_line,
)


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _from(scope: str, project: str | None, source: str | None) -> str:
    """`` [from …]`` after the current project (where it came from); nothing after any other scope."""
    if scope != project or source is None:
        return ""
    return f" [from {texts.english(PROJECT_SOURCES.get(source, source))}]"


def _labels(scopes: Sequence[Any], project: str | None, source: str | None, full: bool) -> str:
    """The scopes of a header: a project by its folder's name, or under ``--long`` (`full`) its whole path."""
    names = [str(scope) for scope in scopes]
    return ", ".join((FOR_MODEL.label(s) if full else project_name(s)) + _from(s, project, source) for s in names)


def _head(record: Mapping[str, Any], full: bool) -> str:
    scope = str(record["scope"])
    return f"({scope if full else project_name(scope)} · {record['kind']})"


def _block(r: Mapping[str, Any], full: bool, cut: Callable[[str], str] = excerpt, client: str | None = None) -> str:
    """A record's head, what `cut` keeps of its content, and its meta line."""
    return f"{_head(r, full)} {cut(str(r.get('content') or ''))}\n{meta_line(r, client=client)}"


def _cut_note(records: Sequence[Mapping[str, Any]]) -> str:
    cut = sum(1 for r in records if r.get("truncated"))
    if not cut:
        return ""
    return (
        f"\n\nNote: {_plural(cut, 'memory is', 'memories are')} too long: only the first {RESULT_CONTENT_CHARS} "
        f"characters are shown here (truncated); {PROG} get <id> returns the whole content."
    )


def list_text(
    structured: Mapping[str, Any],
    *,
    kind: str | None,
    project: str | None,
    source: str | None,
    clients: Mapping[str, str | None],
    more: str,
    full: bool,
) -> str:
    """``memory_list``: the header (`more`: which part of the list this is), then one block per
    record (newest first), as the tool lists them."""
    records = structured.get("records") or []
    total = int(structured.get("total") or 0)
    labels = _labels(structured.get("scopes") or [], project, source, full)
    what = f"{kind} " if kind else ""
    if not records:
        return f"No {what}memories (scopes: {labels})"
    blocks = [_block(r, full, client=clients.get(str(r["id"]))) for r in records]
    noun = f"{what}memory" if total == 1 else f"{what}memories"
    head = f"{total} {noun} (scopes: {labels}; newest first{more})"
    return head + "\n\n" + "\n\n".join(blocks) + _cut_note(records)


def search_text(
    structured: Mapping[str, Any], *, project: str | None, source: str | None, query_cut: int | None, full: bool
) -> str:
    """``memory_search``: the hits with their scores, best first, and the notes the tool adds."""
    records = structured.get("records") or []
    labels = _labels(structured.get("scopes") or [], project, source, full)
    if not records:
        text = f"No matching memories (searched: {labels})"
    else:
        blocks = [f"[relevance {percent(float(r.get('score') or 0))}%] " + _block(r, full) for r in records]
        text = (
            f"Found {_plural(len(records), 'memory', 'memories')} (searched: {labels})\n\n"
            + "\n\n".join(blocks)
            + f"\n\nTip: for the whole content run {PROG} get <the 8-character id prefix above>."
        )
    text += _cut_note(records)
    if query_cut:
        text += f"\n\nNote: the query is too long: only its first {query_cut} characters were searched; a few words do."
    vector = structured.get("vector")
    if isinstance(vector, Mapping) and vector.get("reason") is not None:
        text += f"\n\nNote: this search was lexical only, vectors took no part ({texts.english(vector['reason'])})."
    return text


def get_text(structured: Mapping[str, Any], *, prefix_min: int, full: bool) -> str:
    """``memory_get``: each record whole (or the part asked for), its provenance, then what was not found."""
    blocks = []
    for r in structured.get("records") or []:
        flag = " (superseded/expired: no longer found by search)" if r.get("expiredAt") is not None else ""
        block = f"{_head(r, full)} id={r['id']}{flag}\n{r.get('content') or ''}\n{meta_line(r)}"
        block += source_line(r.get("source"), "source: ") + _part_note(r)
        blocks.append(block)
    count = len(blocks)
    parts = [f"Found {_plural(count, 'memory', 'memories')}" + ("\n\n" + "\n\n".join(blocks) if blocks else "")]
    missing = [str(m) for m in structured.get("missing") or []]
    if missing:
        parts.append("Not found: " + ", ".join(missing))
        short = [m for m in missing if len(m) < prefix_min]
        if short:
            parts.append(f"Tip: an id prefix needs at least {prefix_min} characters ({', '.join(short)} too short).")
    return "\n\n".join(parts)


def _part_note(record: Mapping[str, Any]) -> str:
    total = record.get("contentChars")
    offset = record.get("contentOffset")
    if not isinstance(total, int) or not isinstance(offset, int):
        return ""
    if offset >= total:
        return f"\n  (offset {offset} is past the end: the content has {total} characters)"
    end = record.get("nextOffset")
    if isinstance(end, int):
        after = f"the next part: {PROG} get {record.get('id')} --offset {end}"
        return f"\n  (characters {offset + 1}–{end} of {total}; {after})"
    return f"\n  (characters {offset + 1}–{total} of {total}: the end)"


def forget_text(structured: Mapping[str, Any], *, ident: str | None, query: str | None) -> str:
    """``memory_forget``: what was forgotten, or why nothing was."""
    ids = [str(i) for i in structured.get("ids") or []]
    if ids:
        text = f"Forgot {_plural(len(ids), 'memory', 'memories')}: " + ", ".join(i[:8] for i in ids)
        if structured.get("trashDays"):
            text += (
                f"\nMoved to the trash for {structured['trashDays']} days: restore on the page's trash or with "
                f"`dsh-memory-mcp recover --trash {' '.join(i[:8] for i in ids)}`"
            )
        return text
    if ident is not None:
        return f"Nothing forgotten: no memory with the id {ident.strip()}"
    return f"Nothing forgotten: no memory in the scope contains {str(query or '').strip()!r}"


def confirm_text(structured: Mapping[str, Any], *, limit: int) -> str:
    """``memory_forget``'s ``CONFIRM_REQUIRED``: the matches, and the flag that confirms at a terminal."""
    records = structured.get("records") or []
    count = int(structured.get("count") or len(records))
    head = (
        f"error CONFIRM_REQUIRED: the query matches {count} memories in {structured.get('scope')}, more than {limit}: "
        "nothing was forgotten, in case this is a mistake. To forget them all, run the same command again with "
        "--confirm (what matches then is forgotten); to forget only some, forget them by id."
    )
    blocks = [_block(r, True, snippet) for r in records]
    return head + "\n\nWould be forgotten:\n\n" + "\n\n".join(blocks)


def save_text(structured: Mapping[str, Any], *, project: str | None, source: str | None) -> str:
    """``memory_save``'s sentence (stderr; stdout gets the id)."""
    ident = str(structured.get("id") or "")
    scope = str(structured.get("scope") or "")
    where = scope + _from(scope, project, source)
    if structured.get("deduped"):
        return f"Already there (the same content), not saved again: {ident[:8]} @ {where}"
    return f"Saved memory {ident[:8]} @ {where}"


def error_text(structured: Mapping[str, Any]) -> str:
    """A coded tool error: its code and its message (the tool's own `Text`, in English)."""
    return f"error {structured.get('code')}: {texts.english(structured.get('message') or '')}"
