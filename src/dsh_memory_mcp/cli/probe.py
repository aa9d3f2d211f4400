"""Asking a `serve` URL whether it answers, and whether it takes a given token (``GET /health``).

`setup --url` checks the URL it is about to write, `doctor` each URL host config with the header the
config holds. Standard library only, no proxy (the URLs are usually loopback), short timeouts.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dsh_memory_mcp.config import LOOPBACK_HOSTS
from dsh_memory_mcp.transports import serve_file

State = Literal["ok", "unauthorized", "down", "foreign"]


@dataclass(frozen=True)
class Health:
    """What ``GET /health`` said: `ok` (a dsh-memory-mcp serve took the token), `unauthorized`
    (401/403: it is there but does not take it), `down` (no answer), `foreign` (something else)."""

    state: State
    detail: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


def health(url: str, headers: Mapping[str, str], timeout: float = 2.0) -> Health:
    """``GET /health`` of the serve at `url` (its ``/mcp`` URL) with `headers`."""
    status, data, why = serve_file.get_health(url, headers, timeout)
    if status is None:
        return Health("down", why)
    if status in (401, 403):
        return Health("unauthorized", why)
    if status == 200 and serve_file.is_serve(data):
        return Health("ok", "", data)
    return Health("foreign", f"HTTP {status}")


def _key(url: str) -> tuple[str, str, int | None, str]:
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower()
    if host in LOOPBACK_HOSTS:
        host = "loopback"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    return parts.scheme, host, port, parts.path.rstrip("/") or "/"


def same_serve(a: str, b: str) -> bool:
    """Whether two serve URLs name the same endpoint (loopback names count as one host)."""
    return _key(a) == _key(b)
