"""The per-call context: whose call this is. Every tool function takes one.

The current project, where it came from, and the client's identity belong to the caller (a stdio
host, an HTTP session, a relayed host, a person at the CLI or the web page), not to the process:
one `serve` process serves sessions in different workspaces at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Literal

from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.service.render import FOR_MODEL, FOR_TERMINAL, TextStyle
from dsh_memory_mcp.store.scopes import project_key

#: Where the current project came from: `--project`, `DSH_MEMORY_PROJECT`, the host's workspace
#: variable (`CLAUDE_PROJECT_DIR`…), the client's MCP roots, a relay's header, or the working directory.
ProjectSource = Literal["flag", "env", "host", "roots", "relay", "cwd"]


@dataclass(frozen=True)
class CallContext:
    """Who is calling: the project a bare `project` means, and the client (`name/version`)."""

    project_dir: str
    project_source: ProjectSource = "cwd"
    client: str | None = None
    #: `time.monotonic()` by which the call must be answered (HTTP tool gate), or None.
    deadline: float | None = None
    #: Whether search hits count as accesses (``accessCount``/``lastAccessedAt``). False for a
    #: person browsing the web page: looking is not recall, and must not move rankings or
    #: rewrite scope files (the page would see its own touch as a change and search again).
    record_access: bool = True
    #: Who reads the answer's text: a model (`FOR_MODEL`) or a person at a terminal (`FOR_TERMINAL`).
    style: TextStyle = FOR_MODEL
    #: Whether `memory_forget` keeps what it removes in the trash (`Settings.trash_days`): a person's
    #: forget (the page, the CLI) is undoable; an agent's scrubs the text at once.
    trash: bool = False

    @property
    def project(self) -> str:
        """The scope key of the current project (`project:<normalised path>`)."""
        return project_key(self.project_dir, self.project_dir)

    def remaining(self) -> float | None:
        """Seconds left before the deadline (never negative), or None without one."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def for_terminal(self, *, full_paths: bool = False) -> CallContext:
        """This context for a person reading the answer at a terminal (the human CLI); projects by
        their folder's name unless `full_paths`."""
        return replace(self, style=replace(FOR_TERMINAL, folder_names=not full_paths))

    def for_person(self, client: str) -> CallContext:
        """This context for a person's own call (`client`: the page or the CLI): forgets go to the trash."""
        return replace(self, client=client, trash=True)

    def with_client(self, client: str | None) -> CallContext:
        return replace(self, client=client)

    def with_project(self, project_dir: str, source: ProjectSource) -> CallContext:
        return replace(self, project_dir=project_dir, project_source=source)


def default_context(settings: Settings) -> CallContext:
    """The process-wide default: `--project`, `DSH_MEMORY_PROJECT` or the working directory."""
    return CallContext(project_dir=settings.project_dir, project_source=settings.project_source)
