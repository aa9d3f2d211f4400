"""Prompts (slash commands) and resources (@-mentions): the other two ways MCP puts memory in front
of the model. Every text is the tools' own rendering, so a memory reads the same wherever the model
meets it. Transport-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.render import ToolResult
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.scopes import GLOBAL

if TYPE_CHECKING:
    from dsh_memory_mcp.service.tools import MemoryService

#: Resources per `resources/list` page (the fixed two, then one per memory, newest first).
PAGE_SIZE = 100
RECALL_TOP_K = 8


class FeedError(Exception):
    """A prompt or resource request that cannot be answered: `code` + Chinese `message`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}:{message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class PromptSpec:
    name: str
    title: str
    description: str
    argument: str
    argument_description: str


PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec(
        "recall",
        "回忆相关记忆",
        "Bring the user's long-term memories about a topic into the conversation (memory_search, top 8).",
        "topic",
        "要回忆的主题:关键词或一句话",
    ),
    PromptSpec(
        "remember",
        "记住一件事",
        "Guidance for saving something to the user's long-term memory well (one self-contained sentence, kind, scope).",
        "what",
        "要记住的事",
    ),
)

#: (uriTemplate, name, description) of the resource templates.
TEMPLATES: tuple[tuple[str, str, str], ...] = (
    (
        "memory://scope/{scope}",
        "作用域里的记忆",
        "一个作用域的记忆(与 memory_list 相同),如 global、project、project:/path、自定义名",
    ),
    ("memory://record/{id}", "一条记忆", "按 id(或至少 8 位前缀)取一条记忆的全文(与 memory_get 相同)"),
)


@dataclass(frozen=True)
class ResourceItem:
    uri: str
    name: str
    title: str
    description: str


def _checked(result: ToolResult) -> str:
    if result.is_error:
        raise FeedError(str(result.structured.get("code")), str(result.structured.get("message")))
    return result.text


def get_prompt(service: MemoryService, name: str, arguments: dict[str, str], ctx: CallContext) -> tuple[str, str]:
    """(description, user message text) of prompt `name`.

    :raises FeedError: unknown prompt or a missing argument.
    """
    spec = next((p for p in PROMPTS if p.name == name), None)
    if spec is None:
        raise FeedError("UNKNOWN_PROMPT", f"没有名为 {name!r} 的提示词。可用:{', '.join(p.name for p in PROMPTS)}。")
    value = (arguments.get(spec.argument) or "").strip()
    if not value:
        raise FeedError("TOOL_ERROR", f"提示词 {name} 需要参数 {spec.argument}({spec.argument_description})。")
    if name == "recall":
        found = _checked(service.call("memory_search", {"query": value, "topK": RECALL_TOP_K}, ctx))
        text = (
            f"下面是我的长期记忆里与「{value}」相关的内容(dsh-memory-mcp,memory_search 的结果)。"
            f"回答时以这些记忆为准;需要全文时用 memory_get 传 id。\n\n{found}"
        )
        return spec.description, text
    text = (
        f"请把这件事存进我的长期记忆(调用 memory_save):{value}\n\n"
        "存之前先想清楚:\n"
        "1. content 写成一句自包含的陈述,脱离这段对话也能读懂(写明主语和对象,不要用「这个」「上面说的」)。\n"
        "2. kind 选最贴切的一个:rule(必须遵守的规则)、preference(偏好)、decision(做过的决定)、"
        "procedure(操作步骤)、fact(事实)、note(其它)。\n"
        "3. scope:只对当前项目成立就用 project,对所有项目都成立就用 global(默认)。\n"
        "4. 如果它取代了一条旧记忆,先 memory_search 找到旧记忆,再用 supersedes 传旧 id。\n"
        "5. 不要保存密码、令牌、私钥等凭据:只记下它们放在哪里。"
    )
    return spec.description, text


def list_resources(
    ctx: CallContext, service: MemoryService, cursor: str | None
) -> tuple[list[ResourceItem], str | None]:
    """One page of resources: `memory://global`, `memory://project`, then each live memory of the
    current project and global, newest first. The cursor is the offset (opaque to clients).

    :raises FeedError: a cursor that is not one we handed out.
    """
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        start = -1
    if start < 0:
        raise FeedError("TOOL_ERROR", f"分页游标 {cursor!r} 无效:请从第一页重新列出。")
    project_dir = ctx.project[len("project:") :]
    items = [
        ResourceItem(
            "memory://global", "global", "global 记忆", "所有项目共享的记忆(与 memory_list scope=global 相同)"
        ),
        ResourceItem(
            "memory://project",
            "project",
            f"当前项目的记忆:{project_dir}",
            f"当前项目 {project_dir} 的记忆(与 memory_list scope=project 相同)",
        ),
    ]
    now = service.clock()
    records: list[Record] = []
    for scope in (ctx.project, GLOBAL):
        records.extend(r for r in service.store.snapshot(scope).records if not r.is_expired(now))
    records.sort(key=lambda r: (-r.updated_at, r.id))
    total = len(items) + len(records)
    page = items[start : start + PAGE_SIZE]
    for r in records[max(0, start - len(items)) : start + PAGE_SIZE - len(items)]:
        one_line = " ".join(r.content.split())
        page.append(
            ResourceItem(
                f"memory://record/{r.id}",
                r.short_id,
                one_line[:60] + ("…" if len(one_line) > 60 else ""),
                f"{r.scope}/{r.kind}",
            )
        )
    end = start + len(page)
    return page, (str(end) if end < total else None)


def read_resource(service: MemoryService, uri: str, ctx: CallContext) -> str:
    """The text of resource `uri`, rendered exactly as the tool that lists or fetches it.

    :raises FeedError: an unknown URI, or the tool's own code (e.g. SCOPE_INVALID).
    """
    fixed = {"memory://global": GLOBAL, "memory://project": "project"}
    if uri in fixed or uri.startswith("memory://scope/"):
        scope = fixed.get(uri) or unquote(uri[len("memory://scope/") :])
        return _checked(service.call("memory_list", {"scope": scope, "limit": 200}, ctx))
    if uri.startswith("memory://record/"):
        ident = unquote(uri[len("memory://record/") :])
        text = _checked(service.call("memory_get", {"ids": [ident]}, ctx))
        if text.startswith("找到 0 条记忆"):
            raise FeedError("NOT_FOUND", f"没有 id 为 {ident!r} 的记忆。")
        return text
    raise FeedError(
        "UNKNOWN_RESOURCE",
        f"不认识的资源 {uri!r}:可用 memory://global、memory://project、"
        "memory://scope/{scope}、memory://record/{id}。",
    )
