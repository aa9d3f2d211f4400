"""A `MemoryService` over a real store directory, for tests that call the tools as plain functions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_memory_mcp.config import resolve_settings
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.store.shared import SharedStore

__all__ = ["code", "make_service"]


def make_service(store_dir: Path, project: Path, **env: str) -> MemoryService:
    """The service a front door would open for `project` (`env` instead of the process's environment)."""
    settings = resolve_settings(store_dir=str(store_dir), project_dir=str(project), env=env, cwd=str(project))
    store = SharedStore(settings.store_dir)
    store.prepare()
    return MemoryService(settings=settings, store=store)


def code(result: Any) -> str | None:
    """The error code of a `ToolResult`, None when it is no error."""
    return result.structured.get("code") if result.is_error else None
