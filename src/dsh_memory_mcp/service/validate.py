"""Argument coercion and validation shared by every front door: raw JSON values → typed values or a
spec error code (`InvalidArgument`) with a Chinese message that says how to fix it.

Models send numbers as strings and lists as JSON text; accept what is unambiguous, reject the rest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from dsh_memory_mcp.errors import InvalidArgument
from dsh_memory_mcp.store.records import KINDS

TOPK_DEFAULT, TOPK_MAX = 5, 20
LIMIT_DEFAULT, LIMIT_MAX = 50, 200
IDS_MAX = 50
PREFIX_MIN = 8
ALL_SCOPES = ("all", "*")


def is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def integer_arg(value: Any, *, name: str, low: int, high: int, default: int, code: str) -> int:
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
            f"{name} 必须是 {low}~{high} 之间的整数(收到 {show(value)});省略时默认 {default}。", code=code
        )
    return int(number)


def importance_arg(value: Any) -> float | None:
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
            f"importance 必须是 0~1 之间的数字(收到 {show(value)});不确定时省略即可。", code="IMPORTANCE_RANGE"
        )
    return number


def string_list(value: Any) -> list[str] | None:
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


def tags_arg(value: Any) -> list[str]:
    if value is None:
        return []
    items = string_list(value)
    if items is None:
        raise InvalidArgument(
            f'tags 必须是字符串数组,如 ["python", "部署"](收到 {show(value)});不需要标签时省略。', code="TOOL_ERROR"
        )
    if isinstance(value, str) and not value.strip().startswith("["):
        items = items[0].split(",") if items else []
    seen: dict[str, None] = {}
    for tag in items:
        tag = " ".join(tag.split())
        if tag and tag not in seen:
            seen[tag] = None
    return list(seen)[:32]


def kind_arg(value: Any, *, default: str | None) -> str | None:
    if is_blank(value):
        return default
    if isinstance(value, str) and value.strip().lower() in KINDS:
        return value.strip().lower()
    raise InvalidArgument(f"kind 只能是 {' / '.join(KINDS)} 之一(收到 {show(value)})。", code="KIND_INVALID")


def show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def text_arg(value: Any, *, name: str, code: str, hint: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{name} 不能为空(收到 {show(value)}):{hint}", code=code)
    return value.strip()


def first_of(args: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in args and args[name] is not None:
            return args[name]
    return None
