"""Scope keys: names, path normalisation, file names and ranks (docs/design.md: Store format, Scopes). Pure functions.

The same directory must always give the same key, or one workspace splits into two scopes:
paths are normalised, symlinks not resolved (the DSH plugin does not resolve them either).
"""

from __future__ import annotations

import hashlib
import ntpath
import posixpath
import re
import unicodedata

from dsh_memory_mcp.errors import InvalidArgument, ScopeError
from dsh_memory_mcp.texts import msg

GLOBAL = "global"
RESERVED_NAMES = frozenset({"global", "project", "session", "all"})
_WS = re.compile(r"\s+")
_WINDOWS_ABS = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


def scope_sha1(scope: str) -> str:
    """sha1 hex of the UTF-8 scope key: the file name of every scope except global."""
    return hashlib.sha1(scope.encode("utf-8")).hexdigest()


def scope_file_relpath(scope: str) -> str:
    """`global.jsonl` or `projects/<sha1>.jsonl`, relative to the store directory."""
    if scope == GLOBAL:
        return "global.jsonl"
    return f"projects/{scope_sha1(scope)}.jsonl"


def scope_rank(scope: str) -> int:
    """Tie-break order in results: session 0, project 1, custom 2, global 3."""
    if scope.startswith("session:"):
        return 0
    if scope.startswith("project:"):
        return 1
    if scope == GLOBAL:
        return 3
    return 2


def normalise_path(path: str, base: str) -> str:
    """An absolute, normalised path: `.`/`..` collapsed, no trailing separator, drive upper case.

    Relative paths resolve against `base` (the `--project` directory). Windows paths (with a
    drive letter or a UNC prefix) are normalised with Windows rules on every platform, since a
    store may be shared with a Windows host; symlinks are not resolved.
    """
    if not isinstance(path, str) or not path.strip():
        raise InvalidArgument(
            msg("path 不能为空:请传入工作区目录(绝对路径或相对 --project 的路径)。"), code="PATH_INVALID"
        )
    if "\x00" in path:
        raise InvalidArgument(msg("path 含有 NUL 字符,不是合法路径。"), code="PATH_INVALID")
    path = path.strip()
    if _WINDOWS_ABS.match(path) or (_WINDOWS_ABS.match(base) and not path.startswith("/")):
        if not _WINDOWS_ABS.match(path):
            path = ntpath.join(base, path)
        norm = ntpath.normpath(path)
        if len(norm) >= 2 and norm[1] == ":":
            norm = norm[0].upper() + norm[1:]
        if len(norm) > 3 and norm.endswith("\\"):
            norm = norm.rstrip("\\")
        return norm
    if not path.startswith("/"):
        path = posixpath.join(base, path)
    norm = posixpath.normpath(path)
    if norm.startswith("//"):  # POSIX keeps a leading "//"; one root is enough
        norm = "/" + norm.lstrip("/")
    return norm


def project_key(path: str, base: str) -> str:
    return f"project:{normalise_path(path, base)}"


def normalise_custom_name(name: str, *, code: str = "SCOPE_INVALID") -> str:
    """Fold inner whitespace, lower-case, and check the scope rules (docs/design.md: Scopes); raise `ScopeError`.

    :param code: `SCOPE_INVALID` for a scope argument, `SCOPE_NAME_INVALID` for an alias.
    """
    folded = _WS.sub(" ", name).strip().lower()
    problem = None
    if not folded:
        problem = msg("名字为空")
    elif len(folded) > 64:
        problem = msg("长度 {count} 超过 64 个字符", count=len(folded))
    elif any(ch in folded for ch in (":", "/", "\\")):
        problem = msg("不能包含 : / \\")
    elif ".." in folded:
        problem = msg("不能包含 ..")
    elif any(unicodedata.category(ch) in ("Cc", "Cf") for ch in folded):
        problem = msg("不能包含控制字符")
    elif not folded.strip(". "):
        problem = msg("不能只由点和空格组成")
    elif folded in RESERVED_NAMES:
        problem = msg("{folded!r} 是保留名", folded=folded)
    if problem is not None:
        what = msg("作用域别名") if code == "SCOPE_NAME_INVALID" else msg("作用域名")
        raise ScopeError(
            msg(
                "{what} {name!r} 不合法:{problem}。可用 global、project、session、session:<id>、all,或 1~64 "
                "个字符、不含 : / \\ .. 与控制字符的自定义名。",
                what=what,
                name=name,
                problem=problem,
            ),
            code=code,
        )
    return folded
