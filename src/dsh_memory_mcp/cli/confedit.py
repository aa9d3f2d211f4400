"""Text-preserving edits of host config files (docs/design.md: Host configs): one member of a
JSON(C) object, one element of a JSON(C) array (a host's hook list), one TOML table.

Nothing here re-serialises a whole document: the JSON side parses with spans (comments and trailing
commas allowed, as VS Code does) and splices the text of one member in or out; the TOML side replaces
or appends one ``[table]`` written by a minimal writer. Pure: str in, str out.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_memory_mcp.cli.messages import t


class ConfigSyntaxError(ValueError):
    """The file is not valid JSON(C)/TOML, or holds our entry in a shape we will not edit."""

    def __init__(self, message: str, *, line: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line

    def __str__(self) -> str:
        return t("第 {line} 行:{message}", line=self.line, message=self.message) if self.line else self.message


# --------------------------------------------------------------------------------------------
# JSON with spans
# --------------------------------------------------------------------------------------------


@dataclass
class _Node:
    start: int
    end: int
    value: Any
    members: list[_Member] = field(default_factory=list)  # objects only, in text order
    is_object: bool = False
    items: list[_Node] = field(default_factory=list)  # arrays on the spine only, in text order


@dataclass
class _Member:
    key: str
    key_start: int
    node: _Node


_WS = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}
#: Deeper than any config file; keeps the recursive span parser far from Python's recursion limit
#: (values the C scanner reads have the interpreter's own bound).
_MAX_DEPTH = 100


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


#: The C scanner for values off the path we edit (a 100 KB ``~/.claude.json`` in ~1 ms instead of
#: ~30); NaN/Infinity refused as the span parser refuses them.
_FAST = json.JSONDecoder(parse_constant=_no_constant)


class _Parser:
    """JSON(C) with spans. With a `spine` (the path of objects an edit goes through), only the
    objects on it get member spans; any other value is read by the C scanner in one go (falling
    back to this parser where it has comments or trailing commas)."""

    def __init__(self, text: str, spine: Sequence[str] | None = None) -> None:
        self.text = text
        self.depth = 0
        self.spine = tuple(spine) if spine is not None else None

    def fail(self, pos: int, message: str) -> ConfigSyntaxError:
        return ConfigSyntaxError(message, line=self.text.count("\n", 0, pos) + 1)

    def skip(self, pos: int) -> int:
        match = _WS.match(self.text, pos)
        end = match.end() if match else pos
        if self.text.startswith("/*", end):
            raise self.fail(end, t("注释没有结束(缺 */)"))
        return end

    def value(self, pos: int, trail: tuple[str, ...] = ()) -> _Node:
        pos = self.skip(pos)
        if pos >= len(self.text):
            raise self.fail(pos, t("内容意外结束"))
        char = self.text[pos]
        if char in "{[":
            if self.spine is not None and trail != self.spine[: len(trail)]:
                try:
                    found, end = _FAST.raw_decode(self.text, pos)
                except (ValueError, RecursionError):
                    pass  # comments, trailing commas, too deep: the span parser decides
                else:
                    return _Node(pos, end, found, is_object=isinstance(found, dict))
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                raise self.fail(pos, t("嵌套太深"))
            node = self.obj(pos, trail) if char == "{" else self.arr(pos, trail)
            self.depth -= 1
            return node
        if char == '"':
            text, end = self.string(pos)
            return _Node(pos, end, text)
        match = _NUMBER.match(self.text, pos)
        if match:
            number = match.group()
            return _Node(pos, match.end(), float(number) if any(c in number for c in ".eE") else int(number))
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, pos):
                return _Node(pos, pos + len(word), literal)
        raise self.fail(pos, t("无法识别的内容 {text!r}", text=self.text[pos : pos + 12]))

    def string(self, pos: int) -> tuple[str, int]:
        try:
            return json.decoder.scanstring(self.text, pos + 1, True)  # type: ignore[attr-defined,no-any-return]
        except json.JSONDecodeError as exc:
            raise self.fail(exc.pos, t("字符串不合法")) from exc

    def obj(self, start: int, trail: tuple[str, ...] = ()) -> _Node:
        node = _Node(start, start, {}, is_object=True)
        pos = self.skip(start + 1)
        while True:
            if self.text.startswith("}", pos):
                node.end = pos + 1
                return node
            if not self.text.startswith('"', pos):
                raise self.fail(pos, t("对象里应是带引号的键或 }}"))
            key_start = pos
            key, pos = self.string(pos)
            pos = self.skip(pos)
            if not self.text.startswith(":", pos):
                raise self.fail(pos, t("键后面应是 :"))
            child = self.value(pos + 1, (*trail, key))
            node.members.append(_Member(key, key_start, child))
            node.value[key] = child.value
            pos = self.skip(child.end)
            if self.text.startswith(",", pos):
                pos = self.skip(pos + 1)
            elif not self.text.startswith("}", pos):
                raise self.fail(pos, t("成员之间应是 , 或 }}"))

    def arr(self, start: int, trail: tuple[str, ...] = ()) -> _Node:
        node = _Node(start, start, [])
        pos = self.skip(start + 1)
        while True:
            if self.text.startswith("]", pos):
                node.end = pos + 1
                return node
            child = self.value(pos, (*trail, "\x00[]"))  # never on a spine of object keys
            node.items.append(child)
            node.value.append(child.value)
            pos = self.skip(child.end)
            if self.text.startswith(",", pos):
                pos = self.skip(pos + 1)
            elif not self.text.startswith("]", pos):
                raise self.fail(pos, t("数组元素之间应是 , 或 ]"))


def _root(text: str, spine: Sequence[str] | None = None) -> _Node | None:
    """The document's top node, or None for an empty (whitespace/comments only) file. With a
    `spine`, only the objects along it have member spans (see `_Parser`)."""
    parser = _Parser(text, spine)
    if parser.skip(0) >= len(text):
        return None
    node = parser.value(0)
    end = parser.skip(node.end)
    if end != len(text):
        raise parser.fail(end, t("文档结束后还有多余内容"))
    return node


def parse_json(text: str) -> Any:
    """The value of a JSON(C) document (comments and trailing commas allowed); `{}` when empty."""
    if text.strip():
        try:
            return _FAST.decode(text)  # plain JSON, the usual case: the C scanner
        except (ValueError, RecursionError):
            pass
    root = _root(text)
    return {} if root is None else root.value


def _find(root: _Node, path: Sequence[str]) -> tuple[_Node | None, int]:
    """The object at `path` (or None) and how many path steps exist."""
    node = root
    for depth, name in enumerate(path):
        member = _last(node, name)
        if member is None:
            return None, depth
        if not member.node.is_object:
            raise ConfigSyntaxError(t("{path} 不是对象,不敢改动", path=".".join(path[: depth + 1])))
        node = member.node
    return node, len(path)


def _last(node: _Node, key: str) -> _Member | None:
    """The member `key` as JSON parsers see it: the last one when a key is repeated."""
    found = [m for m in node.members if m.key == key]
    return found[-1] if found else None


def json_get(text: str, path: Sequence[str], key: str) -> Any:
    """The value of member `key` of the object at `path`, or None."""
    root = _root(text, path)
    if root is None or not root.is_object:
        return None
    try:
        node, _ = _find(root, path)
    except ConfigSyntaxError:
        return None
    if node is None:
        return None
    member = _last(node, key)
    return None if member is None else member.node.value


def _line_indent(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    match = re.match(r"[ \t]*", text[start:pos])
    return match.group() if match else ""


def _unit(text: str, root: _Node) -> str:
    """The file's indentation step: the indent of the first top-level member, else two spaces."""
    if root.members:
        indent = _line_indent(text, root.members[0].key_start)
        if indent and text[text.rfind("\n", 0, root.members[0].key_start) + 1 : root.members[0].key_start] == indent:
            return indent
    return "  "


def _render(value: Any, indent: str, unit: str, multiline: bool) -> str:
    """JSON text for `value` whose first line continues a line indented by `indent`.

    Multi-line: one member per line like ``json.dumps(indent=…)``, except that a list of scalars
    stays on one line (``"args": ["--store-dir", "/x"]``, as people write it)."""
    if not multiline:
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict) and value:
        inner = indent + unit
        items = [f"{json.dumps(str(k), ensure_ascii=False)}: {_render(v, inner, unit, True)}" for k, v in value.items()]
        return "{\n" + ",\n".join(inner + item for item in items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        inner = indent + unit
        return "[\n" + ",\n".join(inner + _render(v, inner, unit, True) for v in value) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def _nest(path: Sequence[str], key: str, value: Any) -> Any:
    for name in reversed([*path, key][1:]):
        value = {name: value}
    return value


def json_set(text: str, path: Sequence[str], key: str, value: Any) -> str:
    """`text` with member `key` of the object at `path` set to `value`, the rest byte for byte.

    Missing objects along `path` are created; an existing member is replaced in place; a new one is
    appended after the object's last member, in the object's own layout (one per line or inline).
    """
    root = _root(text, path)
    if root is None:
        return _render(_nest(["", *path], key, value), "", "  ", True) + "\n"
    if not root.is_object:
        raise ConfigSyntaxError(t("顶层不是 JSON 对象,不敢改动"))
    unit = _unit(text, root)
    whole_multiline = "\n" in text[root.start : root.end] or not root.members
    node, depth = _find(root, path)
    if node is None:
        parent, _ = _find(root, path[:depth])
        assert parent is not None
        return _insert(text, parent, path[depth], _nest(path[depth:], key, value), unit, whole_multiline)
    member = _last(node, key)
    if member is None:
        return _insert(text, node, key, value, unit, whole_multiline)
    if member.node.value == value and type(member.node.value) is type(value):
        return text
    multiline = "\n" in text[node.start : node.end]
    rendered = _render(value, _line_indent(text, member.key_start), unit, multiline)
    return text[: member.node.start] + rendered + text[member.node.end :]


def _insert(text: str, obj: _Node, key: str, value: Any, unit: str, whole_multiline: bool) -> str:
    if obj.members:
        multiline = "\n" in text[obj.start : obj.end]
        indent = _line_indent(text, obj.members[0].key_start)
        member = json.dumps(key, ensure_ascii=False) + ": " + _render(value, indent, unit, multiline)
        pos = obj.members[-1].node.end
        return text[:pos] + (",\n" + indent if multiline else ", ") + member + text[pos:]
    inner = text[obj.start + 1 : obj.end - 1]
    outer = _line_indent(text, obj.start)
    indent = outer + unit
    member = json.dumps(key, ensure_ascii=False) + ": " + _render(value, indent, unit, whole_multiline)
    if whole_multiline:
        if not inner.strip():
            return text[: obj.start + 1] + "\n" + indent + member + "\n" + outer + text[obj.end - 1 :]
        return text[: obj.start + 1] + "\n" + indent + member + text[obj.start + 1 :]
    if not inner.strip():
        return text[: obj.start + 1] + member + text[obj.end - 1 :]
    return text[: obj.start + 1] + member + text[obj.start + 1 :]


def json_remove(text: str, path: Sequence[str], key: str) -> str:
    """`text` without member `key` of the object at `path` (every copy of it); unchanged if absent.

    The exact reverse of `json_set` inserting it: the separator before it goes with it. An object
    left empty stays (``"mcpServers": {}``): it may have been there before.
    """
    while True:
        root = _root(text, path)
        if root is None or not root.is_object:
            return text
        node, _ = _find(root, path)
        if node is None:
            return text
        index = next((i for i in range(len(node.members) - 1, -1, -1) if node.members[i].key == key), None)
        if index is None:
            return text
        member = node.members[index]
        if index > 0:
            text = text[: node.members[index - 1].node.end] + text[member.node.end :]
        elif len(node.members) > 1:
            text = text[: member.key_start] + text[node.members[1].key_start :]
        else:
            rest = text[node.start + 1 : member.key_start] + text[member.node.end : node.end - 1]
            if not rest.strip():
                text = text[: node.start + 1] + text[node.end - 1 :]
            else:
                after = _Parser(text).skip(member.node.end)
                if text.startswith(",", after):
                    after += 1
                text = text[: member.key_start] + text[after:]


def _array(text: str, path: Sequence[str], key: str) -> tuple[_Node | None, _Node | None]:
    """(the object at `path`, the array that is its member `key`), each None when absent."""
    root = _root(text, (*path, key))
    if root is None or not root.is_object:
        return None, None
    node, _ = _find(root, path)
    member = None if node is None else _last(node, key)
    if member is None:
        return node, None
    if not isinstance(member.node.value, list):
        raise ConfigSyntaxError(t("{path} 不是数组,不敢改动", path=".".join((*path, key))))
    return node, member.node


def json_append(text: str, path: Sequence[str], key: str, value: Any) -> str:
    """`text` with `value` appended to the array that is member `key` of the object at `path` (the
    array, and objects along `path`, created when missing); the rest byte for byte."""
    _, array = _array(text, path, key)
    if array is None:
        return json_set(text, path, key, [value])
    root = _root(text)
    unit = _unit(text, root) if root is not None else "  "
    if array.items:
        multiline = "\n" in text[array.start : array.end]
        indent = _line_indent(text, array.items[0].start)
        pos = array.items[-1].end
        return (
            text[:pos] + (",\n" + indent if multiline else ", ") + _render(value, indent, unit, multiline) + text[pos:]
        )
    outer = _line_indent(text, array.start)
    indent = outer + unit
    inner = _render(value, indent, unit, True)
    return text[: array.start + 1] + "\n" + indent + inner + "\n" + outer + text[array.end - 1 :]


def json_pull(text: str, path: Sequence[str], key: str, wanted: Callable[[Any], bool]) -> str:
    """`text` without the elements `wanted` picks from the array that is member `key` of the object
    at `path` — the exact reverse of `json_append`: an array left empty goes, and so do the objects
    along `path` it leaves empty (`json_append` created them)."""
    while True:
        node, array = _array(text, path, key)
        if node is None or array is None:
            return text
        index = next((i for i in range(len(array.items) - 1, -1, -1) if wanted(array.items[i].value)), None)
        if index is None:
            return text
        item = array.items[index]
        if len(array.items) == 1:
            text = json_remove(text, path, key)
            for depth in range(len(path), 0, -1):  # the objects it leaves empty
                if json_get(text, path[: depth - 1], path[depth - 1]) != {}:
                    break
                text = json_remove(text, path[: depth - 1], path[depth - 1])
        elif index > 0:
            text = text[: array.items[index - 1].end] + text[item.end :]
        else:
            text = text[: item.start] + text[array.items[1].start :]


# --------------------------------------------------------------------------------------------
# TOML: a minimal writer and a one-table splice
# --------------------------------------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_string(text: str) -> str:
    out = []
    for char in text:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(t("TOML 字符串不能含孤立代理字符"))
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """A key as TOML writes it: bare when it can be, else a basic string."""
    return key if _BARE_KEY.fullmatch(key) else _toml_string(key)


def toml_value(value: Any) -> str:
    """One TOML value: str, bool, int, float, list, or dict (an inline table)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(t("TOML 写不了 {kind}", kind=type(value).__name__))


def toml_dumps_table(table: Sequence[str], values: Mapping[str, Any]) -> str:
    """``[a.b]`` followed by one ``key = value`` line per item (nested tables inline)."""
    lines = ["[" + ".".join(toml_key(k) for k in table) + "]"]
    lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


_HEADER = re.compile(r"^[ \t]*\[(\[)?(.*?)\]\]?[ \t]*(?:#.*)?$")
_KEY_PART = re.compile(r"""[ \t]*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|'([^']*)')[ \t]*""")


def _header_keys(line: str) -> tuple[bool, tuple[str, ...] | None] | None:
    """For a table header line: (is array-of-tables, its keys or None when unparseable); else None."""
    match = _HEADER.match(line.rstrip("\r\n"))
    if not match:
        return None
    inside = match.group(2)
    keys: list[str] = []
    pos = 0
    while True:
        part = _KEY_PART.match(inside, pos)
        if not part:
            return bool(match.group(1)), None
        bare, basic, literal = part.groups()
        if basic is not None:
            try:
                keys.append(json.loads('"' + basic + '"'))
            except ValueError:
                return bool(match.group(1)), None
        else:
            keys.append(bare if bare is not None else literal)
        pos = part.end()
        if pos == len(inside):
            return bool(match.group(1)), tuple(keys)
        if inside[pos] != ".":
            return bool(match.group(1)), None
        pos += 1


def _section(lines: list[str], table: tuple[str, ...]) -> tuple[int, int] | None:
    """Line range of `[table]` with its sub-tables, trailing blank lines excluded."""
    start = None
    for i, line in enumerate(lines):
        header = _header_keys(line)
        if header is None:
            continue
        array, keys = header
        if start is None:
            if not array and keys == table:
                start = i
            continue
        if keys is None or keys[: len(table)] != table:
            end = i
            break
    else:
        end = len(lines)
    if start is None:
        return None
    while end - 1 > start and not lines[end - 1].strip():
        end -= 1
    return start, end


def toml_set_table(text: str, table: Sequence[str], values: Mapping[str, Any]) -> str:
    """`text` with the ``[table]`` section (and its sub-tables) replaced by `values`, or appended."""
    key = tuple(table)
    section = toml_dumps_table(key, values)
    lines = text.splitlines(keepends=True)
    span = _section(lines, key)
    if span is not None:
        start, end = span
        tail = "".join(lines[end:])
        return "".join(lines[:start]) + section + ("\n" if tail and not tail.startswith(("\n", "\r\n")) else "") + tail
    if not text.strip():
        return section
    return (text if text.endswith("\n") else text + "\n") + "\n" + section


def toml_remove_table(text: str, table: Sequence[str]) -> str:
    """`text` without the ``[table]`` section (and its sub-tables) and the blank line before it."""
    lines = text.splitlines(keepends=True)
    span = _section(lines, tuple(table))
    if span is None:
        return text
    start, end = span
    if start > 0 and not lines[start - 1].strip():
        start -= 1
    elif start == 0:
        while end < len(lines) and not lines[end].strip():
            end += 1
    return "".join(lines[:start] + lines[end:])
