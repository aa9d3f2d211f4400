"""``scopes.json``: custom scope names (aliases) → project scope keys, shared with DSH (docs/design.md: Scopes)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from dsh_memory_mcp.errors import ScopeError, StoreError
from dsh_memory_mcp.store import fileio, writing
from dsh_memory_mcp.store.layout import ALIASES_FILE, StoreLayout
from dsh_memory_mcp.store.redact import Once
from dsh_memory_mcp.texts import msg

logger = logging.getLogger("dsh_memory_mcp.store.aliases")


def _display_key(key: object) -> str:
    if isinstance(key, str) and key.startswith("project:"):
        return key[len("project:") :]
    return repr(key)


class AliasFile:
    """Reads and extends ``scopes.json``; writes happen under the ``scopes.json`` lock.

    :param hold: the lock of a name (``hold("scopes.json")``), the store's `LockManager.hold`.
    """

    def __init__(self, layout: StoreLayout, hold: Callable[[str], contextlib.AbstractContextManager[None]]) -> None:
        self.path = layout.aliases_path
        self._hold = hold
        self._reported = Once()

    def _read_raw(self) -> dict[str, Any]:
        """The parsed ``scopes.json``; {} when missing. Raises ValueError/OSError when unusable
        (`fileio.open_regular`: never a FIFO or device)."""
        try:
            with open(fileio.open_regular(self.path), "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(msg("不是 UTF-8 文本")) from exc
        except RecursionError as exc:
            raise ValueError(msg("JSON 嵌套过深")) from exc
        if not isinstance(data, dict):
            raise ValueError(msg("顶层不是 JSON 对象"))
        return data

    def problem(self) -> str | None:
        """Why ``scopes.json`` cannot be used (Chinese, with the fix), or None when it is fine or absent."""
        try:
            self._read_raw()
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            return msg(
                "作用域别名文件 {path} 无法读取或解析({reason}):自定义作用域名暂按没有别名处理,"
                "登记新别名会被拒绝(不会覆盖该文件)。请修复或删除该文件。",
                path=self.path,
                reason=reason,
            )
        return None

    def read(self) -> dict[str, str]:
        """Alias name → project scope key; {} when missing or unreadable (reported once per damage)."""
        try:
            data = self._read_raw()
        except (OSError, ValueError) as exc:
            try:
                st = os.stat(self.path)
                version: object = (st.st_ino, st.st_size, st.st_mtime_ns)
            except OSError:
                version = None
            if self._reported.first((version, str(exc))):
                logger.warning("无法读取作用域别名文件 %s,暂按没有别名处理(不会覆盖该文件):%s", self.path, exc)
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}

    def register(self, name: str, project_key: str) -> None:
        """Record ``name → project_key`` (as given: the tools layer validates it), re-reading the
        file under the ``scopes.json`` lock; the same mapping again writes nothing.

        :raises ScopeError: ``SCOPE_NAME_TAKEN`` when `name` already names another path.
        :raises StoreError: the file cannot be read, parsed (we refuse to overwrite what we cannot
            understand) or written.
        """
        path = self.path
        with self._hold(ALIASES_FILE):
            try:
                data = self._read_raw()
            except (OSError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise StoreError(
                    msg(
                        "作用域别名文件 {path} 无法读取或解析({reason}),为免覆盖其中内容,未登记别名 {name!r}。"
                        "请修复或删除该文件后重试。",
                        path=path,
                        reason=reason,
                        name=name,
                    ),
                    path=path,
                ) from exc
            if name in data:
                existing = data[name]
                if existing == project_key:
                    return
                raise ScopeError(
                    msg(
                        "作用域别名 {name!r} 已指向 {display_key},不能再指向 {display_key2}。请换一个别名,或在 {path} "
                        "中修改原有映射。",
                        name=name,
                        display_key=_display_key(existing),
                        display_key2=_display_key(project_key),
                        path=path,
                    ),
                    code="SCOPE_NAME_TAKEN",
                )
            data[name] = project_key
            try:
                text = json.dumps(data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"
                payload = text.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: escape everything rather than fail
                payload = (json.dumps(data, ensure_ascii=True, indent=2, sort_keys=True) + "\n").encode("ascii")
            writing.replace_file(path, payload)
