"""How tool results look: `ToolResult`, the Chinese text blocks and the structured record dicts.

One rendering for every front door (MCP tools, the human CLI, the web API); a person at a terminal
gets a `TextStyle` (`FOR_TERMINAL`) for the text only. The texts are `texts.msg` templates (memory
content, ids, scopes and paths as fields), so the English CLI shows ``texts.english(result.text)``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.texts import joined, msg, pair

SNIPPET_CHARS = 160
#: The most lines of a record a terminal list or search shows (`excerpt`).
EXCERPT_LINES = 6
#: Search and list results carry at most this much of a record's content (`truncated: true`,
#: `contentChars` = the full length): another program's 50 MB record must not ride on every search.
RESULT_CONTENT_CHARS = 2_000
#: `memory_get` returns at most this much of one record's content per call (`Settings.max_content`
#: when that is larger, so whatever `memory_save` accepts comes whole). A bigger record another
#: program wrote comes in parts: `truncated`, `contentChars`, `nextOffset`, and `offset` for the next.
GET_CONTENT_CHARS = 20_000


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: `text` for the model, `structured` for programs."""

    text: str
    structured: dict[str, Any]
    is_error: bool = False


@dataclass(frozen=True)
class TextStyle:
    """The reader-dependent parts of the text blocks (never of the structured content)."""

    #: A person at a terminal: ``(scope · kind)`` heads (``scope/kind`` reads like a path), spaced kind
    #: counts, scores as the page shows them, excerpts that keep their first lines, and hints that name
    #: ``dsh-memory-mcp get`` / ``--confirm`` instead of the tools' arguments.
    terminal: bool = False
    #: Projects named by their folder (``atlas-web``) rather than their whole path.
    folder_names: bool = False

    def excerpt(self, content: str) -> str:
        """What a list or a search shows of a record's content."""
        return excerpt(content) if self.terminal else snippet(content)

    def score(self, value: float) -> str:
        """A search hit's score at the start of its block."""
        if self.terminal:
            return msg("[相关度 {percent}%]", percent=percent(value))
        return f"[{value:.4f}]"

    def head(self, record: Record) -> str:
        """``(scope/kind)``: what a block about `record` starts with."""
        scope = project_name(record.scope) if self.folder_names else record.scope
        return f"({scope}{' · ' if self.terminal else '/'}{record.kind})"

    def label(self, scope: str, current: str | None = None, source: str | None = None) -> str:
        """A scope in a header: a project by its path (its folder's name when `folder_names`), others
        by their key; the current project (`current`) also says where it came from."""
        name = project_name(scope) if self.folder_names else scope.removeprefix("project:")
        return joined([name, source_note(source)], "", "") if source is not None and scope == current else name

    def full_content_hint(self) -> str:
        """The search footer: how to get a record whole."""
        if self.terminal:
            return msg("提示:需要完整内容时运行 dsh-memory-mcp get <上面的 8 位 id 前缀>。")
        return msg("提示:需要完整内容时用 memory_get 传入上面的 8 位 id 前缀。")

    def confirm_hint(self) -> str:
        """How to confirm a forget that matched many records."""
        if self.terminal:
            return msg("同样的命令加 --confirm 再运行一次")
        return msg("用同样的参数加 confirm: true 再调用一次")

    def next_part_hint(self, ident: str, end: int) -> str:
        """How to get the next part of a long record."""
        if self.terminal:
            return msg("下一段:dsh-memory-mcp get {id} --offset {end}", id=ident, end=end)
        return msg("下一段用 memory_get 传同一 id 与 offset: {end};命令行可用 dsh-memory-mcp export 取全文", end=end)


#: The tools' own text (MCP, the web page's writes).
FOR_MODEL = TextStyle()
#: The human CLI's text.
FOR_TERMINAL = TextStyle(terminal=True, folder_names=True)


def error_result(code: str, message: str) -> ToolResult:
    """A coded error: `错误 CODE:message` for the model, `{ok: false, code, message}` for programs."""
    text = msg("错误 {code}:{message}", code=code, message=message)
    return ToolResult(text=text, structured={"ok": False, "code": code, "message": message}, is_error=True)


def percent(score: float) -> int:
    """A score as the page shows it: 0–100, capped."""
    return round(min(1.0, max(0.0, score)) * 100)


def fmt_time(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


#: Where the current project came from, as answers name it (with the English CLI's words).
PROJECT_SOURCES = {
    "flag": pair("--project", "--project"),
    "env": pair("DSH_MEMORY_PROJECT", "DSH_MEMORY_PROJECT"),
    "host": pair("宿主的工作区变量", "the host's workspace variable"),
    "roots": pair("客户端 roots", "the client's roots"),
    "relay": pair("relay", "relay"),
    "cwd": pair("工作目录", "the working directory"),
}


def source_note(source: str) -> str:
    """` [来自 客户端 roots]`: appended wherever an answer names the current project."""
    return msg(" [来自 {source}]", source=PROJECT_SOURCES.get(source, source))


def project_name(scope: str) -> str:
    """A scope as a person names it: a project by its folder's name, any other scope by its key."""
    if scope.startswith("project:"):
        return os.path.basename(scope[len("project:") :].rstrip("/\\")) or scope
    return scope


def client_of(record: Record) -> str | None:
    """The `source.client` a record was written by (`name/version`), or None."""
    source = record.data.get("source")
    client = source.get("client") if isinstance(source, dict) else None
    return client if isinstance(client, str) and client else None


def record_dict(
    record: Record, *, score: float | None = None, max_chars: int | None = None, offset: int = 0, paged: bool = False
) -> dict[str, Any]:
    """The structured form of a record; with `max_chars`, longer content is cut and flagged.

    `offset` starts the content there; `paged` (memory_get) adds `nextOffset` when more follows and
    `contentOffset`/`contentChars` whenever the answer is not the whole content.
    """
    out: dict[str, Any] = {"id": record.id, "shortId": record.short_id}
    if score is not None:
        out["score"] = score
    content = record.content
    end = len(content) if max_chars is None else min(len(content), offset + max_chars)
    cut = end < len(content)
    out.update(
        scope=record.scope,
        kind=record.kind,
        content=content[offset:end] if cut or offset else content,
        tags=record.tags,
        importance=record.importance,
        updatedAt=record.updated_at,
    )
    if cut:
        out.update(truncated=True, contentChars=len(content))
    if paged and (cut or offset):
        out.update(contentChars=len(content), contentOffset=min(offset, len(content)))
        if cut:
            out["nextOffset"] = end
    return out


def part_note(record: Record, offset: int, limit: int, style: TextStyle = FOR_MODEL) -> str:
    """Where a `memory_get` part sits in a long record, and how to get the next ("" when whole)."""
    total = len(record.content)
    end = min(total, offset + limit)
    if offset == 0 and end == total:
        return ""
    if offset >= total:
        return msg("\n  (offset {offset} 超出内容长度:全文共 {total} 个字符)", offset=offset, total=total)
    if end < total:
        return msg(
            "\n  (内容共 {total} 个字符,这里是第 {first}–{end} 个;{next})",
            total=total,
            first=offset + 1,
            end=end,
            next=style.next_part_hint(record.id, end),
        )
    return msg("\n  (内容共 {total} 个字符,这里是第 {first}–{end} 个,已到末尾)", total=total, first=offset + 1, end=end)


def truncation_note(count: int) -> str | None:
    """The note a search/list answer ends with when `count` records were cut (None when none)."""
    if not count:
        return None
    return msg(
        "注意:{count} 条记忆内容过长,结果里只带前 {chars} 个字符(truncated);完整内容请用 memory_get 取回。",
        count=count,
        chars=RESULT_CONTENT_CHARS,
    )


def snippet(content: str) -> str:
    # Slice first: a huge record must not be split and joined whole on every search.
    head = content[: SNIPPET_CHARS * 8]
    one_line = " ".join(head.split())
    if len(one_line) <= SNIPPET_CHARS and len(head) == len(content):
        return one_line
    return one_line[: SNIPPET_CHARS - 1] + "…"


def excerpt(content: str) -> str:
    """`snippet` for a person: the content's first non-blank lines (markdown stays readable, a list
    item keeps its indent), at most `EXCERPT_LINES` and `SNIPPET_CHARS` characters, each line after
    the first indented under the block's head."""
    head = content[: SNIPPET_CHARS * 8]
    rows = [(raw[: len(raw) - len(raw.lstrip())][:8], " ".join(raw.split())) for raw in head.splitlines()]
    rows = [(" " * len(indent), text) for indent, text in rows if text]
    out: list[str] = []
    left = SNIPPET_CHARS
    for n, (indent, text) in enumerate(rows):
        if n == EXCERPT_LINES or left <= 0:
            out[-1] += " …"
            break
        if len(text) > left:
            out.append(indent + text[: left - 1] + "…")
            break
        out.append(indent + text)
        left -= len(text)
    else:
        if out and len(head) < len(content):
            out[-1] += "…"
    return "\n    ".join(out)


def meta_line(record: Mapping[str, Any], *, client: str | None = None) -> str:
    """The line under a record's block, from its `record_dict`."""
    parts = [f"id={record['shortId']}"]
    tags = record.get("tags") or []
    if tags:
        parts.append("tags=" + ",".join(str(tag) for tag in tags))
    importance = record.get("importance")
    if isinstance(importance, (int, float)) and not isinstance(importance, bool):
        parts.append(f"importance={importance:.2f}")
    parts.append(f"updated={fmt_time(int(record.get('updatedAt') or 0))}")
    if client:
        parts.append(f"client={client}")
    return "  " + " ".join(parts)


def source_line(source: Any) -> str:
    """`\n  来源:explicit · claude-code/1.2.0`: a record's parsed ``source`` field (provenance) for
    full views; "" without one."""
    if not isinstance(source, Mapping):
        return ""
    parts = [value for value in (source.get("origin"), source.get("client")) if isinstance(value, str) and value]
    return msg("\n  来源:{source}", source=" · ".join(parts)) if parts else ""
