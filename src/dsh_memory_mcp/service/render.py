"""How tool results look: `ToolResult`, the Chinese text blocks and the structured record dicts.

One rendering for every front door (MCP tools, the human CLI, the web API), so a memory reads the same
wherever a person or a model meets it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from dsh_memory_mcp.store.records import Record

SNIPPET_CHARS = 160


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: `text` for the model, `structured` for programs."""

    text: str
    structured: dict[str, Any]
    is_error: bool = False


def error_result(code: str, message: str) -> ToolResult:
    """A coded error: `错误 CODE:message` for the model, `{ok: false, code, message}` for programs."""
    text = f"错误 {code}:{message}"
    return ToolResult(text=text, structured={"ok": False, "code": code, "message": message}, is_error=True)


def fmt_time(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def scope_label(scope: str) -> str:
    """How a scope is shown in a search header: a project by its path, others by their key."""
    return scope[len("project:") :] if scope.startswith("project:") else scope


def record_dict(record: Record, *, score: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": record.id, "shortId": record.short_id}
    if score is not None:
        out["score"] = score
    out.update(
        scope=record.scope,
        kind=record.kind,
        content=record.content,
        tags=record.tags,
        importance=record.importance,
        updatedAt=record.updated_at,
    )
    return out


def snippet(content: str) -> str:
    one_line = " ".join(content.split())
    return one_line if len(one_line) <= SNIPPET_CHARS else one_line[: SNIPPET_CHARS - 1] + "…"


def meta_line(record: Record, *, full_id: bool = False) -> str:
    parts = [f"id={record.id if full_id else record.short_id}"]
    if record.tags:
        parts.append("tags=" + ",".join(record.tags))
    if record.importance is not None:
        parts.append(f"importance={record.importance:.2f}")
    parts.append(f"updated={fmt_time(record.updated_at)}")
    return "  " + " ".join(parts)
