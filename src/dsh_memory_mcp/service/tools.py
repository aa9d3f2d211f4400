"""The five memory tools as plain functions over plain data (SPEC §5, §6).

Nothing here knows about MCP: `MemoryService.call(name, arguments)` takes the raw JSON arguments
of a `tools/call` and returns a `ToolResult` (text for the model, structured data for programs,
an error flag). Every invalid argument comes back as a spec error code with a Chinese message
that says how to fix it; no exception escapes `call`. `server.py` only adapts this to the SDK,
so a later HTTP front door can call the very same functions.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.errors import DshMemoryError, InvalidArgument, ScopeError
from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.store.records import KINDS, Record, now_ms
from dsh_memory_mcp.store.scopes import (
    GLOBAL,
    normalise_custom_name,
    normalise_path,
    project_key,
)

if TYPE_CHECKING:
    from dsh_memory_mcp.search.vectors import VectorChannel
    from dsh_memory_mcp.store.shared import SharedStore

__all__ = [
    "TOOL_NAMES",
    "TOOL_SPECS",
    "MemoryService",
    "ToolResult",
    "ToolSpec",
    "close_service",
    "open_service",
]

log = logging.getLogger("dsh_memory_mcp.service.tools")

TOPK_DEFAULT, TOPK_MAX = 5, 20
LIMIT_DEFAULT, LIMIT_MAX = 50, 200
IDS_MAX = 50
PREFIX_MIN = 8
SNIPPET_CHARS = 160
_ALL = ("all", "*")


@dataclass(frozen=True)
class ToolResult:
    """What a tool returns: `text` for the model, `structured` for programs."""

    text: str
    structured: dict[str, Any]
    is_error: bool = False


def _error_result(code: str, message: str) -> ToolResult:
    text = f"错误 {code}:{message}"
    return ToolResult(text=text, structured={"ok": False, "code": code, "message": message}, is_error=True)


# ----------------------------------------------------------------------------------------------
# argument coercion: models send numbers as strings and lists as JSON text; accept what is
# unambiguous, reject the rest with the spec's code.


def _is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _integer(value: Any, *, name: str, low: int, high: int, default: int, code: str) -> int:
    if value is None:
        return default
    number: float | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer()):
        number = value
    elif isinstance(value, str) and value.strip():
        try:
            parsed = float(value.strip())
        except ValueError:
            parsed = math.nan
        if math.isfinite(parsed) and parsed.is_integer():
            number = parsed
    if number is None or not low <= number <= high:
        raise InvalidArgument(
            f"{name} 必须是 {low}~{high} 之间的整数(收到 {_show(value)});省略时默认 {default}。", code=code
        )
    return int(number)


def _importance(value: Any) -> float | None:
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and value.strip():
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise InvalidArgument(
            f"importance 必须是 0~1 之间的数字(收到 {_show(value)});不确定时省略即可。", code="IMPORTANCE_RANGE"
        )
    return number


def _string_list(value: Any) -> list[str] | None:
    """A list of strings from a list, a JSON-encoded list, or one string; `None` if not possible."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            if isinstance(decoded, list):
                value = decoded
            else:
                return [text]
        else:
            return [text] if text else []
    if not isinstance(value, list):
        return None
    out: list[str] = []
    for item in value:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            out.append(str(item))
        else:
            return None
    return out


def _tags(value: Any) -> list[str]:
    if value is None:
        return []
    items = _string_list(value)
    if items is None:
        raise InvalidArgument(
            f'tags 必须是字符串数组,如 ["python", "部署"](收到 {_show(value)});不需要标签时省略。', code="TOOL_ERROR"
        )
    if isinstance(value, str) and not value.strip().startswith("["):
        items = items[0].split(",") if items else []
    seen: dict[str, None] = {}
    for tag in items:
        tag = " ".join(tag.split())
        if tag and tag not in seen:
            seen[tag] = None
    return list(seen)[:32]


def _kind(value: Any, *, default: str | None) -> str | None:
    if _is_blank(value):
        return default
    if isinstance(value, str) and value.strip().lower() in KINDS:
        return value.strip().lower()
    raise InvalidArgument(f"kind 只能是 {' / '.join(KINDS)} 之一(收到 {_show(value)})。", code="KIND_INVALID")


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _text_arg(value: Any, *, name: str, code: str, hint: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{name} 不能为空(收到 {_show(value)}):{hint}", code=code)
    return value.strip()


# ----------------------------------------------------------------------------------------------
# rendering


def _fmt_time(ms: int) -> str:
    if ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _scope_label(scope: str) -> str:
    """How a scope is shown in a search header: a project by its path, others by their key."""
    return scope[len("project:") :] if scope.startswith("project:") else scope


def _record_dict(record: Record, *, score: float | None = None) -> dict[str, Any]:
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


def _snippet(content: str) -> str:
    one_line = " ".join(content.split())
    return one_line if len(one_line) <= SNIPPET_CHARS else one_line[: SNIPPET_CHARS - 1] + "…"


def _meta_line(record: Record, *, full_id: bool = False) -> str:
    parts = [f"id={record.id if full_id else record.short_id}"]
    if record.tags:
        parts.append("tags=" + ",".join(record.tags))
    if record.importance is not None:
        parts.append(f"importance={record.importance:.2f}")
    parts.append(f"updated={_fmt_time(record.updated_at)}")
    return "  " + " ".join(parts)


# ----------------------------------------------------------------------------------------------
# the service


@dataclass
class MemoryService:
    """The five tools over one store. Thread-safe: the SDK calls sync tools from worker threads."""

    settings: Settings
    store: SharedStore
    vectors: VectorChannel | None = None
    clock: Callable[[], int] = now_ms
    _handlers: dict[str, Callable[[Mapping[str, Any]], ToolResult]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._handlers = {
            "memory_save": self.memory_save,
            "memory_search": self.memory_search,
            "memory_list": self.memory_list,
            "memory_get": self.memory_get,
            "memory_forget": self.memory_forget,
        }

    @property
    def current_project(self) -> str:
        return project_key(self.settings.project_dir, self.settings.project_dir)

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolResult:
        """Run one tool; never raises. Unknown names → UNKNOWN_TOOL, crashes → TOOL_ERROR."""
        handler = self._handlers.get(name)
        if handler is None:
            return _error_result("UNKNOWN_TOOL", f"没有名为 {name!r} 的工具。可用工具:{', '.join(TOOL_NAMES)}。")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            return _error_result("TOOL_ERROR", "参数必须是一个 JSON 对象。")
        try:
            return handler(arguments)
        except DshMemoryError as exc:
            return _error_result(exc.code, exc.message)
        except Exception:
            log.exception("tool %s failed unexpectedly", name)
            return _error_result("TOOL_ERROR", f"{name} 执行时发生内部错误,记忆库未被改动。详情见服务端日志(stderr)。")

    # -- scope decisions -------------------------------------------------------------------------

    def _named_scope(self, raw: str) -> str:
        """A scope argument that is neither absent nor `all` → its key (aliases resolved)."""
        text = raw.strip()
        low = text.lower()
        if low == GLOBAL:
            return GLOBAL
        if low in ("project", "session"):
            # Bare session = current project: session ids differ per host, so they share nothing.
            return self.current_project
        if low.startswith("session:"):
            ident = text[len("session:") :].strip()
            if not ident or any(ord(ch) < 32 for ch in ident):
                raise ScopeError(f"作用域 {raw!r} 不合法:session: 后面需要会话 id。", code="SCOPE_INVALID")
            return f"session:{ident}"
        if low.startswith("project:"):
            path = text[len("project:") :].strip()
            if not path:
                raise ScopeError("作用域 'project:' 后面需要工作区路径。", code="SCOPE_INVALID")
            return f"project:{normalise_path(path, self.settings.project_dir)}"
        name = normalise_custom_name(text)
        alias = self.store.read_aliases().get(name)
        return alias if alias else name

    def _scope_arg(self, value: Any) -> str | None:
        """The scope argument as a stripped string, `None` when omitted."""
        if _is_blank(value):
            return None
        if not isinstance(value, str):
            raise ScopeError(f"scope 必须是字符串(收到 {_show(value)})。", code="SCOPE_INVALID")
        return value.strip()

    def _path_arg(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise InvalidArgument(f"path 必须是非空的目录路径(收到 {_show(value)});不需要时省略。", code="PATH_INVALID")
        return value

    def _path_scope(self, path: str, scope: str | None) -> str:
        """`path` given: its project key; `scope` may only agree with it or name an alias for it."""
        key = project_key(path, self.settings.project_dir)
        if scope is None:
            return key
        low = scope.lower()
        if low in (GLOBAL, "session", *_ALL) or low.startswith("session:"):
            raise InvalidArgument(
                f"path 与 scope={scope!r} 冲突:给了 path 就是写入该工作区(project 作用域);"
                "要写 global/session 请去掉 path。",
                code="PATH_SCOPE_CONFLICT",
            )
        if low == "project":
            return key
        if low.startswith("project:"):
            other = f"project:{normalise_path(scope[len('project:') :], self.settings.project_dir)}"
            if other != key:
                raise InvalidArgument(
                    f"path 指向 {key[len('project:') :]},scope 却是 {scope!r}:两者只保留一个。",
                    code="PATH_SCOPE_CONFLICT",
                )
            return key
        name = normalise_custom_name(scope, code="SCOPE_NAME_INVALID")
        self.store.register_alias(name, key)
        return key

    def _write_scope(self, scope_value: Any, path_value: Any) -> str:
        scope = self._scope_arg(scope_value)
        path = self._path_arg(path_value)
        if path is not None:
            return self._path_scope(path, scope)
        if scope is None:
            return self.current_project if self.settings.scope_all else GLOBAL
        if scope.lower() in _ALL:
            raise ScopeError(
                "all 是只读范围(所有作用域),不能写入:请指定 global、project 或具体作用域。", code="SCOPE_NOT_WRITABLE"
            )
        return self._named_scope(scope)

    def _read_scopes(self, scope_value: Any, path_value: Any) -> list[str]:
        scope = self._scope_arg(scope_value)
        path = self._path_arg(path_value)
        if path is not None:
            return [self._path_scope(path, scope)]
        if scope is None:
            return [self.current_project, GLOBAL]
        if scope.lower() in _ALL:
            found = self.store.discover_scopes()
            return found if GLOBAL in found else [*found, GLOBAL]
        return [self._named_scope(scope)]

    # -- tools -------------------------------------------------------------------------------------

    def memory_save(self, args: Mapping[str, Any]) -> ToolResult:
        content = _text_arg(
            args.get("content"),
            name="content",
            code="CONTENT_EMPTY",
            hint="请传入一句自包含的陈述,脱离上下文也能读懂。",
        )
        kind = _kind(args.get("kind"), default="note") or "note"
        tags = _tags(args.get("tags"))
        importance = _importance(args.get("importance"))
        supersedes_raw = args.get("supersedes")
        supersedes: str | None = None
        if not _is_blank(supersedes_raw):
            if not isinstance(supersedes_raw, str) or len(supersedes_raw.strip()) < PREFIX_MIN:
                raise InvalidArgument(
                    f"supersedes 必须是被取代记忆的 id 或至少 {PREFIX_MIN} 位前缀(收到 {_show(supersedes_raw)})。",
                    code="TOOL_ERROR",
                )
            supersedes = supersedes_raw.strip()
        scope = self._write_scope(args.get("scope"), args.get("path"))
        result = self.store.save(scope, content, kind=kind, tags=tags, importance=importance, supersedes=supersedes)
        record = result.record
        if not result.deduped and self.vectors is not None:
            self.vectors.record_saved(scope, record)
        if result.deduped:
            text = f"记忆已存在(内容相同),未重复保存 {record.short_id} @ {record.scope}"
        else:
            text = f"已保存记忆 {record.short_id} @ {record.scope}"
        if supersedes is not None:
            if result.superseded is not None:
                text += f"\n已取代旧记忆 {result.superseded.short_id}(旧记录保留在磁盘,不再出现在检索中)"
            else:
                text += f"\n未找到要取代的记忆 {supersedes},没有记录被隐藏"
        structured: dict[str, Any] = {
            "ok": True,
            "id": record.id,
            "deduped": result.deduped,
            "scope": record.scope,
            "kind": record.kind,
        }
        if supersedes is not None:
            structured["superseded"] = result.superseded.id if result.superseded is not None else None
        return ToolResult(text=text, structured=structured)

    def memory_search(self, args: Mapping[str, Any]) -> ToolResult:
        query = _text_arg(
            args.get("query"), name="query", code="QUERY_EMPTY", hint="请传入关键词或一句话描述要找的内容。"
        )
        top_k = _integer(
            _first(args, "topK", "top_k", "topk"),
            name="topK",
            low=1,
            high=TOPK_MAX,
            default=TOPK_DEFAULT,
            code="TOPK_RANGE",
        )
        scopes = self._read_scopes(args.get("scope"), args.get("path"))
        snapshots = [self.store.snapshot(s) for s in scopes]
        vector_scores = None
        if self.vectors is not None:
            vector_scores = self.vectors.query_scores(query, snapshots)
        hits = scoring.rank(snapshots, query, top_k=top_k, now=self.clock(), vector_scores=vector_scores)
        touched: dict[str, list[str]] = {}
        for hit in hits:
            touched.setdefault(hit.scope, []).append(hit.record.id)
        if touched:
            self.store.touch(touched)
        labels = ", ".join(_scope_label(s) for s in scopes)
        records = [_record_dict(hit.record, score=hit.score) for hit in hits]
        if not hits:
            text = f"没有找到相关记忆(检索范围:{labels})"
        else:
            blocks = [
                f"[{hit.score:.4f}] ({hit.record.scope}/{hit.record.kind}) {_snippet(hit.record.content)}\n"
                + _meta_line(hit.record)
                for hit in hits
            ]
            text = (
                f"找到 {len(hits)} 条记忆(检索范围:{labels})\n\n"
                + "\n\n".join(blocks)
                + "\n\n提示:需要完整内容时用 memory_get 传入上面的 8 位 id 前缀。"
            )
        return ToolResult(
            text=text, structured={"ok": True, "count": len(records), "scopes": scopes, "records": records}
        )

    def memory_list(self, args: Mapping[str, Any]) -> ToolResult:
        kind = _kind(args.get("kind"), default=None)
        limit = _integer(
            args.get("limit"), name="limit", low=1, high=LIMIT_MAX, default=LIMIT_DEFAULT, code="LIMIT_RANGE"
        )
        scopes = self._read_scopes(args.get("scope"), args.get("path"))
        now = self.clock()
        seen: set[str] = set()
        found: list[Record] = []
        for scope in scopes:
            for record in self.store.snapshot(scope).records:
                if record.is_expired(now) or record.id in seen or (kind is not None and record.kind != kind):
                    continue
                seen.add(record.id)
                found.append(record)
        found.sort(key=lambda r: (-r.updated_at, r.id))
        total = len(found)
        shown = found[:limit]
        labels = ", ".join(_scope_label(s) for s in scopes)
        what = f"{kind} 类" if kind else ""
        if not shown:
            text = f"没有{what}记忆(范围:{labels})"
        else:
            blocks = [f"({r.scope}/{r.kind}) {_snippet(r.content)}\n{_meta_line(r)}" for r in shown]
            more = f",仅显示最新 {len(shown)} 条(调大 limit 可看更多)" if total > len(shown) else ""
            text = f"共 {total} 条{what}记忆(范围:{labels};按最近更新排序{more})\n\n" + "\n\n".join(blocks)
        return ToolResult(
            text=text,
            structured={
                "ok": True,
                "count": len(shown),
                "total": total,
                "scopes": scopes,
                "records": [_record_dict(r) for r in shown],
            },
        )

    def memory_get(self, args: Mapping[str, Any]) -> ToolResult:
        raw = args.get("ids", args.get("id"))
        items = _string_list(raw) if raw is not None else None
        keys: list[str] = []
        if items is not None:
            for item in items:
                key = item.strip()
                if key and key not in keys:
                    keys.append(key)
        if not keys:
            raise InvalidArgument(
                f"ids 必须是非空的 id 数组(完整 id 或至少 {PREFIX_MIN} 位前缀),收到 {_show(raw)}。",
                code="IDS_EMPTY",
            )
        keys = keys[:IDS_MAX]
        matches = self.store.find([k for k in keys if len(k) >= PREFIX_MIN])
        records: list[Record] = []
        missing: list[str] = []
        seen: set[str] = set()
        for key in keys:
            hits = matches.get(key, []) if len(key) >= PREFIX_MIN else []
            if not hits:
                missing.append(key)
            for record in hits:
                if record.id not in seen:
                    seen.add(record.id)
                    records.append(record)
        now = self.clock()
        blocks = []
        for r in records:
            flag = "(已被取代/过期,检索中不再出现)" if r.is_expired(now) else ""
            blocks.append(f"({r.scope}/{r.kind}) id={r.id}{flag}\n{r.content}\n{_meta_line(r)}")
        parts = [f"找到 {len(records)} 条记忆" + ("\n\n" + "\n\n".join(blocks) if blocks else "")]
        if missing:
            short = [k for k in missing if len(k) < PREFIX_MIN]
            parts.append("未找到:" + ", ".join(missing))
            if short:
                parts.append(f"提示:id 前缀至少 {PREFIX_MIN} 位({', '.join(short)} 太短)。")
        out = []
        for r in records:
            entry = _record_dict(r)
            if r.expired_at is not None:
                entry["expiredAt"] = r.expired_at
            out.append(entry)
        return ToolResult(
            text="\n\n".join(parts),
            structured={"ok": True, "count": len(out), "records": out, "missing": missing},
        )

    def memory_forget(self, args: Mapping[str, Any]) -> ToolResult:
        ident, query = args.get("id"), args.get("query")
        has_id, has_query = not _is_blank(ident), not _is_blank(query)
        if has_id and has_query:
            raise InvalidArgument(
                "id 与 query 只能给一个:按 id 精确删除一条,或按 query(内容子串)批量删除。", code="TARGET_AMBIGUOUS"
            )
        if not has_id and not has_query:
            raise InvalidArgument(
                "需要 id(精确 id 或至少 8 位前缀)或 query(内容子串)之一,告诉我删哪条。", code="TARGET_REQUIRED"
            )
        if has_id:
            if not isinstance(ident, str):
                raise InvalidArgument(f"id 必须是字符串(收到 {_show(ident)})。", code="TARGET_REQUIRED")
            removed = self._forget_id(ident.strip())
        else:
            if not isinstance(query, str):
                raise InvalidArgument(f"query 必须是字符串(收到 {_show(query)})。", code="TARGET_REQUIRED")
            scope = self._scope_arg(args.get("scope"))
            path = self._path_arg(args.get("path"))
            if scope is not None and scope.lower() in _ALL:
                raise ScopeError(
                    "按 query 删除不能用 scope=all(防止跨作用域批量误删):请指定一个作用域,或改用 id。",
                    code="SCOPE_NOT_WRITABLE",
                )
            if path is not None:
                target = self._path_scope(path, scope)
            elif scope is None:
                target = self.current_project
            else:
                target = self._named_scope(scope)
            removed = self.store.delete_matching(target, query.strip())
        ids = [r.id for r in removed]
        if removed:
            text = f"已删除 {len(removed)} 条记忆 " + ", ".join(f"{r.short_id} @ {r.scope}" for r in removed)
        elif has_id:
            text = f"没有删除任何记忆:未找到 id {str(ident).strip()}"
        else:
            text = f"没有删除任何记忆:作用域内没有内容包含 {str(query).strip()!r} 的记忆"
        return ToolResult(text=text, structured={"ok": True, "deleted": len(ids), "ids": ids})

    def _forget_id(self, key: str) -> list[Record]:
        if len(key) < PREFIX_MIN:
            raise InvalidArgument(f"id 至少需要 {PREFIX_MIN} 位(收到 {key!r})。", code="TARGET_REQUIRED")
        matches = self.store.find([key]).get(key, [])
        unique = {r.id: r for r in matches}
        if len(unique) > 1:
            listing = ", ".join(f"{r.id} @ {r.scope}" for r in unique.values())
            raise InvalidArgument(
                f"前缀 {key!r} 匹配到 {len(unique)} 条记忆:{listing}。请给出更长的前缀或完整 id。",
                code="TARGET_AMBIGUOUS",
            )
        if not unique:
            return []
        return self.store.delete_ids(list(unique))


def _first(args: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in args and args[name] is not None:
            return args[name]
    return None


# ----------------------------------------------------------------------------------------------
# declarations: one place for each tool's name, description, schemas and annotations


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False


_SCOPE_DOC = (
    "作用域:global(所有项目共享)、project(当前工作区)、session 或 session:<id>、project:<路径>、"
    "自定义名(已登记的别名会解析到它的工作区)"
)
_RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "shortId": {"type": "string", "description": "id 的前 8 位"},
        "score": {"type": "number", "description": "相关度,4 位小数(仅检索)"},
        "scope": {"type": "string"},
        "kind": {"type": "string", "enum": list(KINDS)},
        "content": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "importance": {"type": ["number", "null"]},
        "updatedAt": {"type": "integer", "description": "毫秒时间戳"},
        "expiredAt": {"type": "integer"},
    },
    "required": ["id", "shortId", "scope", "kind", "content", "tags", "importance", "updatedAt"],
}


def _out(properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}, **properties},
        "required": ["ok", *required],
    }


TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="memory_save",
        title="保存长期记忆",
        description=(
            "Save one durable fact to the user's long-term memory, shared by every IDE/agent they use. "
            "Use it when the user states a preference, a decision, a convention, a procedure or a fact worth "
            "remembering across sessions. content must be one self-contained sentence. Default scope: global "
            "(or the current project when DSH_MEMORY_SCOPE_ALL is set); pass scope='project' or path=<workspace> "
            "for project-only memories. Saving identical content again returns the existing id (deduped). "
            "supersedes=<old id> hides an outdated memory. Errors: CONTENT_EMPTY, KIND_INVALID, IMPORTANCE_RANGE, "
            "PATH_INVALID, PATH_SCOPE_CONFLICT, SCOPE_INVALID, SCOPE_NOT_WRITABLE, SCOPE_NAME_INVALID, "
            "SCOPE_NAME_TAKEN, LOCK_TIMEOUT, STORE_ERROR."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "content": {
                    "type": "string",
                    "minLength": 1,
                    "description": "一句自包含的陈述,脱离上下文也能读懂。",
                },
                "scope": {"type": "string", "description": _SCOPE_DOC + "。默认 global;all 不可写。"},
                "path": {"type": "string", "description": "工作区目录;给出则写入 project:<该目录>。"},
                "kind": {"type": "string", "enum": list(KINDS), "default": "note", "description": "记忆种类"},
                "tags": {"type": "array", "items": {"type": "string"}, "default": [], "description": "自由标签"},
                "importance": {"type": "number", "minimum": 0, "maximum": 1, "description": "重要度 0~1,可省略"},
                "supersedes": {"type": "string", "description": "被本条取代的旧记忆 id(或 8 位前缀)"},
            },
            "required": ["content"],
        },
        output_schema=_out(
            {
                "id": {"type": "string"},
                "deduped": {"type": "boolean"},
                "scope": {"type": "string"},
                "kind": {"type": "string"},
                "superseded": {"type": ["string", "null"]},
            },
            ["id", "deduped", "scope", "kind"],
        ),
        idempotent=True,
    ),
    ToolSpec(
        name="memory_search",
        title="检索长期记忆",
        description=(
            "Search the user's long-term memory by keywords or a sentence (Chinese and English). Use it BEFORE "
            "answering questions about the user's preferences, projects, conventions or past decisions. Default "
            "scope: current project + global; scope='all' searches every scope. Returns up to topK (1-20, default 5) "
            "memories with 8-char ids; call memory_get with those ids for full text. Errors: QUERY_EMPTY, "
            "TOPK_RANGE, SCOPE_INVALID, PATH_INVALID, PATH_SCOPE_CONFLICT."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "关键词或一句话描述"},
                "scope": {
                    "type": "string",
                    "description": _SCOPE_DOC + ";all 或 * = 所有作用域。默认当前项目 + global。",
                },
                "path": {"type": "string", "description": "只检索该工作区(project:<目录>)"},
                "topK": {"type": "integer", "minimum": 1, "maximum": TOPK_MAX, "default": TOPK_DEFAULT},
            },
            "required": ["query"],
        },
        output_schema=_out(
            {
                "count": {"type": "integer"},
                "scopes": {"type": "array", "items": {"type": "string"}},
                "records": {"type": "array", "items": _RECORD_SCHEMA},
            },
            ["count", "scopes", "records"],
        ),
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        name="memory_list",
        title="列出长期记忆",
        description=(
            "List memories newest first, optionally of one kind. Use it to browse what is remembered. Default "
            "scope: current project + global; scope='all' lists every scope. limit 1-200 (default 50). Errors: "
            "KIND_INVALID, LIMIT_RANGE, SCOPE_INVALID, PATH_INVALID, PATH_SCOPE_CONFLICT."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "scope": {"type": "string", "description": _SCOPE_DOC + ";all = 所有作用域。默认当前项目 + global。"},
                "path": {"type": "string", "description": "只列出该工作区(project:<目录>)"},
                "kind": {"type": "string", "enum": list(KINDS), "description": "只列出这一种"},
                "limit": {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX, "default": LIMIT_DEFAULT},
            },
        },
        output_schema=_out(
            {
                "count": {"type": "integer"},
                "total": {"type": "integer"},
                "scopes": {"type": "array", "items": {"type": "string"}},
                "records": {"type": "array", "items": _RECORD_SCHEMA},
            },
            ["count", "scopes", "records"],
        ),
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        name="memory_get",
        title="按 id 取回记忆",
        description=(
            "Fetch memories by id or 8-char id prefix (from memory_search/memory_list), in any scope, with full "
            "content. Use it when you already know the ids; don't search again. Up to 50 ids, duplicates ignored; "
            "unknown ids are listed in missing. Errors: IDS_EMPTY."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "ids": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "description": f"完整 id 或至少 8 位前缀;自动去重,最多取前 {IDS_MAX} 个",
                },
            },
            "required": ["ids"],
        },
        output_schema=_out(
            {
                "count": {"type": "integer"},
                "records": {"type": "array", "items": _RECORD_SCHEMA},
                "missing": {"type": "array", "items": {"type": "string"}},
            },
            ["count", "records", "missing"],
        ),
        read_only=True,
        idempotent=True,
    ),
    ToolSpec(
        name="memory_forget",
        title="删除记忆",
        description=(
            "Delete memories: give exactly one of id (exact id or 8-char prefix, any scope) or query (content "
            "substring, deletes every match in one scope). With query the default scope is the current project "
            "only (global is never touched unless scope='global'); scope='all' is refused. Errors: "
            "TARGET_REQUIRED, TARGET_AMBIGUOUS, SCOPE_NOT_WRITABLE, SCOPE_INVALID, LOCK_TIMEOUT, STORE_ERROR."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "要删除的记忆 id 或至少 8 位前缀(与 query 二选一)"},
                "query": {"type": "string", "description": "按内容子串批量删除(与 id 二选一)"},
                "scope": {"type": "string", "description": "query 删除的作用域;默认当前项目;不可为 all"},
                "path": {"type": "string", "description": "query 删除限定到该工作区"},
            },
        },
        output_schema=_out(
            {"deleted": {"type": "integer"}, "ids": {"type": "array", "items": {"type": "string"}}},
            ["deleted", "ids"],
        ),
        destructive=True,
    ),
)

TOOL_NAMES: tuple[str, ...] = tuple(spec.name for spec in TOOL_SPECS)


# ----------------------------------------------------------------------------------------------
# composition: one place that wires a store, a vector channel and the service together, for every
# front door (the stdio server, the human subcommands, a later HTTP server). Transport-free.


def open_service(settings: Settings, *, prepare: bool = True) -> MemoryService:
    """The store and, when `settings.vector.enabled`, a vector channel (not started), wired together.

    :param prepare: create and check the store directory (the server; write commands). Read-only
        commands pass False so that looking at a store that does not exist creates nothing.
    :raises StoreError: `prepare` and the store directory cannot be created or written.
    """
    from dsh_memory_mcp.store.shared import SharedStore

    channel: VectorChannel | None = None

    def on_delete(scope: str, ids: list[str]) -> None:
        # Runs inside the scope lock, after the JSONL rewrite: the sidecar follows the records.
        if channel is not None:
            channel.on_delete(scope, ids)

    store = SharedStore(settings.store_dir, on_delete=on_delete)
    if prepare:
        store.prepare()
    if settings.vector.enabled:
        from dsh_memory_mcp.search.vectors import VectorChannel

        channel = VectorChannel(settings.vector, store)
    return MemoryService(settings=settings, store=store, vectors=channel)


def close_service(service: MemoryService) -> None:
    """Stop what the channel spawned and flush pending touches; safe to call twice."""
    try:
        if service.vectors is not None:
            service.vectors.close()
    finally:
        service.store.close()
