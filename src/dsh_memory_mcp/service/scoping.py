"""Scope decisions for one call: which scope a write goes to, which scopes a read covers.

Relative paths and the bare `project`/`session` words resolve against the call's own project
(`CallContext`), never a process-wide one, so one server can serve sessions in different workspaces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp.errors import InvalidArgument, ScopeError
from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.validate import ALL_SCOPES, is_blank, show
from dsh_memory_mcp.store.scopes import GLOBAL, normalise_custom_name, project_key
from dsh_memory_mcp.texts import msg

if TYPE_CHECKING:
    from dsh_memory_mcp.store.shared import SharedStore


@dataclass(frozen=True)
class ScopeResolver:
    """Scope arguments → scope keys, for one call's context. `register` = may write `scopes.json`."""

    store: SharedStore
    ctx: CallContext
    scope_all: bool = False

    def named_scope(self, raw: str) -> str:
        """A scope argument that is neither absent nor `all` → its key (aliases resolved)."""
        text = raw.strip()
        low = text.lower()
        if low == GLOBAL:
            return GLOBAL
        if low in ("project", "session"):
            # Bare session = current project: session ids differ per host, so they share nothing.
            return self.ctx.project
        if low.startswith("session:"):
            ident = text[len("session:") :].strip()
            if not ident or any(ord(ch) < 32 for ch in ident):
                raise ScopeError(msg("作用域 {raw!r} 不合法:session: 后面需要会话 id。", raw=raw), code="SCOPE_INVALID")
            return f"session:{ident}"
        if low.startswith("project:"):
            path = text[len("project:") :].strip()
            if not path:
                raise ScopeError(msg("作用域 'project:' 后面需要工作区路径。"), code="SCOPE_INVALID")
            return project_key(path, self.ctx.project_dir)
        name = normalise_custom_name(text)
        alias = self.store.read_aliases().get(name)
        return alias if alias else name

    def scope_arg(self, value: Any) -> str | None:
        """The scope argument as a stripped string, `None` when omitted."""
        if is_blank(value):
            return None
        if not isinstance(value, str):
            raise ScopeError(msg("scope 必须是字符串(收到 {show})。", show=show(value)), code="SCOPE_INVALID")
        return value.strip()

    def path_arg(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise InvalidArgument(
                msg("path 必须是非空的目录路径(收到 {show});不需要时省略。", show=show(value)), code="PATH_INVALID"
            )
        return value

    def path_scope(self, path: str, scope: str | None, *, register: bool = True) -> str:
        """`path` given: its project key; `scope` may only agree with it or name an alias for it.

        A custom `scope` name is registered as an alias of the path only when `register` (writes):
        a read writes nothing at all, so it only checks that the name is valid.
        """
        key = project_key(path, self.ctx.project_dir)
        if scope is None:
            return key
        low = scope.lower()
        if low in (GLOBAL, "session", *ALL_SCOPES) or low.startswith("session:"):
            raise InvalidArgument(
                msg(
                    "path 与 scope={scope!r} 冲突:给了 path 就是写入该工作区(project 作用域);要写 global/session "
                    "请去掉 path。",
                    scope=scope,
                ),
                code="PATH_SCOPE_CONFLICT",
            )
        if low == "project":
            return key
        if low.startswith("project:"):
            other = project_key(scope[len("project:") :], self.ctx.project_dir)
            if other != key:
                raise InvalidArgument(
                    msg(
                        "path 指向 {key},scope 却是 {scope!r}:两者只保留一个。", key=key[len("project:") :], scope=scope
                    ),
                    code="PATH_SCOPE_CONFLICT",
                )
            return key
        name = normalise_custom_name(scope, code="SCOPE_NAME_INVALID")
        if register:
            self.store.register_alias(name, key)
        return key

    def write_scope(self, scope_value: Any, path_value: Any) -> str:
        scope = self.scope_arg(scope_value)
        path = self.path_arg(path_value)
        if path is not None:
            return self.path_scope(path, scope)
        if scope is None:
            return self.ctx.project if self.scope_all else GLOBAL
        if scope.lower() in ALL_SCOPES:
            raise ScopeError(
                msg("all 是只读范围(所有作用域),不能写入:请指定 global、project 或具体作用域。"),
                code="SCOPE_NOT_WRITABLE",
            )
        return self.named_scope(scope)

    def read_scopes(self, scope_value: Any, path_value: Any) -> list[str]:
        scope = self.scope_arg(scope_value)
        path = self.path_arg(path_value)
        if path is not None:
            return [self.path_scope(path, scope, register=False)]
        if scope is None:
            return [self.ctx.project, GLOBAL]
        if scope.lower() in ALL_SCOPES:
            found = self.store.discover_scopes()
            return found if GLOBAL in found else [*found, GLOBAL]
        return [self.named_scope(scope)]
