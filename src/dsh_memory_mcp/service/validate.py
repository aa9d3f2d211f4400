"""Argument coercion and validation shared by every front door: raw JSON values → typed values or a
spec error code (`InvalidArgument`) with a Chinese message that says how to fix it.

Models send numbers as strings and lists as JSON text; accept what is unambiguous, reject the rest.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from dsh_memory_mcp.errors import InvalidArgument
from dsh_memory_mcp.service.secrets import find_secret
from dsh_memory_mcp.store.records import KINDS
from dsh_memory_mcp.texts import msg

log = logging.getLogger("dsh_memory_mcp.service.validate")

TOPK_DEFAULT, TOPK_MAX = 5, 20
LIMIT_DEFAULT, LIMIT_MAX = 50, 200
IDS_MAX = 50
PREFIX_MIN = 8
ALL_SCOPES = ("all", "*")
#: A save's `tags`: at most this many, each at most `TAG_CHARS_MAX` characters (else TAGS_INVALID).
TAGS_MAX, TAG_CHARS_MAX = 32, 64
#: A search query longer than this is cut to it (and the answer says so): it is keywords or one
#: sentence, and its cost (tokens, the embedding request) must not grow with what a caller sends.
QUERY_MAX_CHARS = 1_000


def is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _number(value: Any) -> float | None:
    """A finite number, or a string that spells one; None for anything else (booleans included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip():
        try:
            value = float(value.strip())
        except ValueError:
            return None
    return value if isinstance(value, float) and math.isfinite(value) else None


def integer_arg(value: Any, *, name: str, low: int, high: int, default: int, code: str) -> int:
    if value is None:
        return default
    number = _number(value)
    if number is None or not low <= number <= high or number != int(number):
        raise InvalidArgument(
            msg(
                "{name} 必须是 {low}~{high} 之间的整数(收到 {show});省略时默认 {default}。",
                name=name,
                low=low,
                high=high,
                show=show(value),
                default=default,
            ),
            code=code,
        )
    return int(number)


def importance_arg(value: Any) -> float | None:
    if value is None:
        return None
    number = _number(value)
    if number is None or not 0.0 <= number <= 1.0:
        raise InvalidArgument(
            msg("importance 必须是 0~1 之间的数字(收到 {show});不确定时省略即可。", show=show(value)),
            code="IMPORTANCE_RANGE",
        )
    return float(number)


def string_list(value: Any) -> list[str] | None:
    """A list of strings from a list, a JSON-encoded list, or one string; `None` if not possible."""
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("["):
            return [text] if text else []
        try:
            value = json.loads(text)
        except ValueError:
            return [text]
        if not isinstance(value, list):
            return [text]
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


def tags_arg(value: Any) -> list[str]:
    """Distinct, whitespace-normalised tags; anything else is TAGS_INVALID, never silently cut."""
    if value is None:
        return []
    items = string_list(value)
    if items is None:
        raise InvalidArgument(
            msg('tags 必须是字符串数组,如 ["python", "部署"](收到 {show});不需要标签时省略。', show=show(value)),
            code="TAGS_INVALID",
        )
    if isinstance(value, str) and not value.strip().startswith("["):
        items = items[0].split(",") if items else []
    seen: dict[str, None] = {}
    for tag in items:
        tag = " ".join(tag.split())
        if len(tag) > TAG_CHARS_MAX:
            raise InvalidArgument(
                msg(
                    "标签 {show} 有 {count} 个字符,超过上限 {limit}:标签应是短词,长内容写进 content。",
                    show=show(tag),
                    count=len(tag),
                    limit=TAG_CHARS_MAX,
                ),
                code="TAGS_INVALID",
            )
        if tag and tag not in seen:
            seen[tag] = None
    if len(seen) > TAGS_MAX:
        raise InvalidArgument(
            msg(
                "tags 有 {count} 个(去重后),最多 {limit} 个:只留最能帮助检索的几个。",
                count=len(seen),
                limit=TAGS_MAX,
            ),
            code="TAGS_INVALID",
        )
    return list(seen)


def kind_arg(value: Any, *, default: str | None) -> str | None:
    if is_blank(value):
        return default
    if isinstance(value, str) and value.strip().lower() in KINDS:
        return value.strip().lower()
    raise InvalidArgument(
        msg("kind 只能是 {value} 之一(收到 {show})。", value=" / ".join(KINDS), show=show(value)), code="KIND_INVALID"
    )


def show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def text_arg(value: Any, *, name: str, code: str, hint: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(
            msg("{name} 不能为空(收到 {show}):{hint}", name=name, show=show(value), hint=hint), code=code
        )
    return value.strip()


def content_arg(value: Any, *, max_chars: int) -> str:
    """A save's content: non-blank (CONTENT_EMPTY) and at most `max_chars` (CONTENT_TOO_LONG)."""
    content = text_arg(
        value, name="content", code="CONTENT_EMPTY", hint=msg("请传入一句自包含的陈述,脱离上下文也能读懂。")
    )
    if len(content) > max_chars:
        raise InvalidArgument(
            msg(
                "content 有 {count} 个字符,超过上限 {max_chars}(DSH_MEMORY_MAX_CONTENT):一条记忆应是一句自包含的陈述;"
                "长文档请存成文件,记忆里只记它在哪、讲什么,或拆成几条要点分别保存。",
                count=len(content),
                max_chars=max_chars,
            ),
            code="CONTENT_TOO_LONG",
        )
    return content


def query_arg(value: Any) -> tuple[str, bool]:
    """A search query (QUERY_EMPTY if blank), cut to `QUERY_MAX_CHARS`; and whether it was cut."""
    query = text_arg(value, name="query", code="QUERY_EMPTY", hint=msg("请传入关键词或一句话描述要找的内容。"))
    if len(query) > QUERY_MAX_CHARS:
        return query[:QUERY_MAX_CHARS], True
    return query, False


def refuse_secrets(content: str, tags: list[str]) -> None:
    """CONTENT_SECRET when the content (or a tag) carries a credential; the value is never echoed."""
    for text in (content, *tags):
        finding = find_secret(text)
        if finding is None:
            continue
        log.info("refused a save or import: content looks like a credential (%s)", finding.kind)
        raise InvalidArgument(
            msg(
                "内容里像是有凭据({kind}),记忆库是本机所有 IDE 和智能体都能读的明文,不能保存密钥本身。"
                "请改为记下「密钥放在哪里」,例如:「OpenAI key 存在 1Password 的 OpenAI 条目里,运行时读环境变量 "
                "OPENAI_API_KEY」,不要写出值。若确属误判,用户可设置环境变量 DSH_MEMORY_ALLOW_SECRETS=1 关闭此检查。",
                kind=finding.kind,
            ),
            code="CONTENT_SECRET",
        )
