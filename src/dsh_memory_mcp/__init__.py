"""dsh-memory-mcp: one long-term memory store shared by every MCP host.

This module only carries the version: importing the package must never load the
MCP SDK, numpy or httpx, so `--help`/`--version` stay fast and work when the SDK
is missing or broken.
"""

from __future__ import annotations

__version__ = "0.1.0"
