"""What each tool declares: name, title, description, input and output JSON schemas, annotations.

The descriptions are what a model reads to learn when and how to call a tool; the output schemas are
what hosts validate `structuredContent` against (the TypeScript SDK does so even for error results).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dsh_memory_mcp.service.validate import IDS_MAX, LIMIT_DEFAULT, LIMIT_MAX, TOPK_DEFAULT, TOPK_MAX
from dsh_memory_mcp.store.records import KINDS


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
    #: Hosts that defer MCP tools behind a tool search (Claude Code) keep this one loaded:
    #: `_meta["anthropic/alwaysLoad"]` on `tools/list`. Only the tools a turn needs without asking.
    always_load: bool = False


_SCOPE_DOC = (
    "作用域:global(所有项目共享)、project(当前工作区)、session 或 session:<id>、project:<路径>、"
    "自定义名(已登记的别名会解析到它的工作区)"
)


def _typed(type_name: str, description: str | None = None, **keywords: Any) -> dict[str, Any]:
    """A property: its JSON type, its other keywords (`enum`, `minimum`, `default`…), then its description."""
    out: dict[str, Any] = {"type": type_name, **keywords}
    if description is not None:
        out["description"] = description
    return out


def _nullable(type_name: str) -> dict[str, Any]:
    """`T or null` as `anyOf` branches: a `type` array is legal JSON Schema but less portable (the
    Inspector flags it; single-`type` dialects such as Gemini's reject or drop it)."""
    return {"anyOf": [_typed(type_name), _typed("null")]}


def _strings(description: str | None = None, **keywords: Any) -> dict[str, Any]:
    return _typed("array", description, items=_typed("string"), **keywords)


_RECORD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": _typed("string"),
        "shortId": _typed("string", "id 的前 8 位"),
        "score": _typed("number", "相关度,4 位小数(仅检索)"),
        "scope": _typed("string"),
        "kind": _typed("string", enum=list(KINDS)),
        "content": _typed("string"),
        "tags": _strings(),
        "importance": _nullable("number"),
        "updatedAt": _typed("integer", "毫秒时间戳"),
        "expiredAt": _typed("integer"),
        "truncated": _typed(
            "boolean",
            "内容过长,只带了一部分(检索/列表:前 2000 字,全文用 memory_get;memory_get:超过 20000 字的分段)",
        ),
        "contentChars": _typed("integer", "被截断或分段时:全文的字符数"),
        "contentOffset": _typed("integer", "memory_get 分段时:这一段从第几个字符开始(0 起)"),
        "nextOffset": _typed("integer", "memory_get 分段且后面还有时:下一段的 offset"),
        "source": _typed("object", "出处(仅 memory_get):origin,以及写入它的客户端 client = name/version"),
    },
    "required": ["id", "shortId", "scope", "kind", "content", "tags", "importance", "updatedAt"],
}


def _records(description: str | None = None) -> dict[str, Any]:
    return _typed("array", description, items=_RECORD_SCHEMA)


def _input(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """A tool's inputSchema: an object of `properties`, `required` listed only when some are."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


#: The error shape every tool returns with `isError: true` (`render.error_result`).
ERROR_SHAPE: dict[str, Any] = {
    "type": "object",
    "title": "错误",
    "properties": {"ok": {"const": False}},
    "required": ["ok", "code", "message"],
}


def _out(properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    """A tool's outputSchema: its success shape OR the error shape.

    The TypeScript SDK (Claude Code, Cursor, VS Code, the Inspector) validates `structuredContent`
    against `outputSchema` even when `isError` is true, so a success-only schema turns every coded
    error into `MCP error -32602` and the model never sees the code. Both shapes share one
    `properties` table; `anyOf` picks which fields are required.
    """
    return {
        "type": "object",
        "properties": {
            "ok": _typed("boolean", "true:成功;false:出错,见 code 与 message"),
            **properties,
            "code": _typed("string", "错误码(仅出错时),如 TOPK_RANGE"),
            "message": _typed("string", "错误说明与修正方法(仅出错时)"),
        },
        "required": ["ok"],
        "anyOf": [
            {"type": "object", "title": "成功", "properties": {"ok": {"const": True}}, "required": ["ok", *required]},
            ERROR_SHAPE,
        ],
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
            "supersedes=<old id> hides an outdated memory. content: at most 20,000 characters; tags: at most "
            "32, each at most 64 characters. Never save credentials (keys, tokens, passwords): save where the "
            "secret lives instead. Errors: CONTENT_EMPTY, CONTENT_TOO_LONG, CONTENT_SECRET, TAGS_INVALID, "
            "KIND_INVALID, IMPORTANCE_RANGE, PATH_INVALID, PATH_SCOPE_CONFLICT, SCOPE_INVALID, SCOPE_NOT_WRITABLE, "
            "SCOPE_NAME_INVALID, SCOPE_NAME_TAKEN, LOCK_TIMEOUT, STORE_ERROR, INTERNAL_ERROR."
        ),
        input_schema=_input(
            {
                "content": _typed(
                    "string", "一句自包含的陈述,脱离上下文也能读懂;最多 20000 字符,不要含密钥/口令。", minLength=1
                ),
                "scope": _typed("string", _SCOPE_DOC + "。默认 global;all 不可写。"),
                "path": _typed("string", "工作区目录;给出则写入 project:<该目录>。"),
                "kind": _typed("string", "记忆种类", enum=list(KINDS), default="note"),
                "tags": _strings("自由标签,最多 32 个,每个 ≤ 64 字符", default=[]),
                "importance": _typed("number", "重要度 0~1,可省略", minimum=0, maximum=1),
                "supersedes": _typed("string", "被本条取代的旧记忆 id(或 8 位前缀)"),
            },
            ["content"],
        ),
        output_schema=_out(
            {
                "id": _typed("string"),
                "deduped": _typed("boolean"),
                "scope": _typed("string"),
                "kind": _typed("string"),
                "superseded": _nullable("string"),
                "similar": {
                    "type": "array",
                    "description": "与本条意思几乎相同的已有记忆(若本条是对它的更正,请用 supersedes 取代它)",
                    "items": _typed(
                        "object",
                        properties={"id": _typed("string"), "shortId": _typed("string"), "score": _typed("number")},
                        required=["id", "shortId", "score"],
                    ),
                },
            },
            ["id", "deduped", "scope", "kind"],
        ),
        idempotent=True,
        always_load=True,
    ),
    ToolSpec(
        name="memory_search",
        title="检索长期记忆",
        description=(
            "Search the user's long-term memory by keywords or a sentence (Chinese and English). Use it BEFORE "
            "answering questions about the user's preferences, projects, conventions or past decisions. Default "
            "scope: current project + global; scope='all' searches every scope. Returns up to topK (1-20, default 5) "
            "memories with 8-char ids; call memory_get with those ids for full text (content over 2,000 characters "
            "comes truncated). A query over 1,000 characters is cut. Errors: QUERY_EMPTY, TOPK_RANGE, "
            "SCOPE_INVALID, PATH_INVALID, PATH_SCOPE_CONFLICT, INTERNAL_ERROR."
        ),
        input_schema=_input(
            {
                "query": _typed("string", "关键词或一句话描述(超过 1000 字符只用前 1000)", minLength=1),
                "scope": _typed("string", _SCOPE_DOC + ";all 或 * = 所有作用域。默认当前项目 + global。"),
                "path": _typed("string", "只检索该工作区(project:<目录>)"),
                "topK": _typed("integer", minimum=1, maximum=TOPK_MAX, default=TOPK_DEFAULT),
            },
            ["query"],
        ),
        output_schema=_out(
            {
                "count": _typed("integer"),
                "scopes": _strings(),
                "records": _records(),
                "vector": {
                    "type": "object",
                    "description": "向量检索这次是否参与:used 参与;skipped 被跳过(reason 说明原因);off 未启用",
                    "properties": {
                        "state": _typed("string", enum=["used", "skipped", "off"]),
                        "reason": _typed("string"),
                    },
                    "required": ["state"],
                },
            },
            ["count", "scopes", "records"],
        ),
        read_only=True,
        idempotent=True,
        always_load=True,
    ),
    ToolSpec(
        name="memory_list",
        title="列出长期记忆",
        description=(
            "List memories newest first, optionally of one kind. Use it to browse what is remembered. Default "
            "scope: current project + global; scope='all' lists every scope. limit 1-200 (default 50). Errors: "
            "KIND_INVALID, LIMIT_RANGE, SCOPE_INVALID, PATH_INVALID, PATH_SCOPE_CONFLICT, INTERNAL_ERROR."
        ),
        input_schema=_input(
            {
                "scope": _typed("string", _SCOPE_DOC + ";all = 所有作用域。默认当前项目 + global。"),
                "path": _typed("string", "只列出该工作区(project:<目录>)"),
                "kind": _typed("string", "只列出这一种", enum=list(KINDS)),
                "limit": _typed("integer", minimum=1, maximum=LIMIT_MAX, default=LIMIT_DEFAULT),
                "client": _typed("string", "只列出该客户端写入的记忆(source.client 包含此文本)"),
            }
        ),
        output_schema=_out(
            {"count": _typed("integer"), "total": _typed("integer"), "scopes": _strings(), "records": _records()},
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
            "unknown ids are listed in missing. Content over 20,000 characters (only other programs write such "
            "records) comes in parts: truncated, contentChars and nextOffset; pass offset=nextOffset for the next "
            "part. Errors: IDS_EMPTY, TOOL_ERROR (bad offset), INTERNAL_ERROR."
        ),
        input_schema=_input(
            {
                "ids": _typed(
                    "array",
                    f"完整 id 或至少 8 位前缀;自动去重,最多取前 {IDS_MAX} 个",
                    items=_typed("string", minLength=1),
                    minItems=1,
                ),
                "offset": _typed(
                    "integer",
                    "从内容的第几个字符开始(0 起);超长记录分段取回时传上一段的 nextOffset",
                    minimum=0,
                    default=0,
                ),
            },
            ["ids"],
        ),
        output_schema=_out(
            {"count": _typed("integer"), "records": _records(), "missing": _strings()},
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
            "only (global is never touched unless scope='global'); scope='all' is refused. A query matching more "
            "than 3 memories (configurable) deletes nothing and returns CONFIRM_REQUIRED with the list: show it, "
            "then repeat the call with confirm=true to delete the memories matching at that time. Errors: "
            "TARGET_REQUIRED, TARGET_AMBIGUOUS, CONFIRM_REQUIRED, SCOPE_NOT_WRITABLE, SCOPE_INVALID, LOCK_TIMEOUT, "
            "STORE_ERROR, INTERNAL_ERROR."
        ),
        input_schema=_input(
            {
                "id": _typed("string", "要删除的记忆 id 或至少 8 位前缀(与 query 二选一)"),
                "query": _typed("string", "按内容子串批量删除(与 id 二选一)"),
                "scope": _typed("string", "query 删除的作用域;默认当前项目;不可为 all"),
                "path": _typed("string", "query 删除限定到该工作区"),
                "confirm": _typed(
                    "boolean", "query 匹配超过 3 条(可配置)时,看过 CONFIRM_REQUIRED 返回的列表后设为 true 才删除"
                ),
            }
        ),
        output_schema=_out(
            {
                "deleted": _typed("integer"),
                "ids": _strings(),
                "scope": _typed("string", "CONFIRM_REQUIRED:按 query 匹配的作用域"),
                "count": _typed("integer", "CONFIRM_REQUIRED:匹配的条数(什么都没删)"),
                "records": _records("CONFIRM_REQUIRED:将被删除的记忆;确认后带 confirm: true 再调用"),
            },
            ["deleted", "ids"],
        ),
        destructive=True,
    ),
)

TOOL_NAMES: tuple[str, ...] = tuple(spec.name for spec in TOOL_SPECS)
