"""Asking a `serve` URL whether it answers, and whether it takes a given token (``GET /health``).

`setup --url` checks the URL it is about to write, `doctor` each URL host config with the header the
config holds. Standard library only, no proxy (the URLs are usually loopback), short timeouts.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

_MAX_BYTES = 64 * 1024
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

State = Literal["ok", "unauthorized", "down", "foreign"]


@dataclass(frozen=True)
class Health:
    """What ``GET /health`` said: `ok` (a dsh-memory-mcp serve took the token), `unauthorized`
    (401/403: it is there but does not take it), `down` (no answer), `foreign` (something else)."""

    state: State
    detail: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


def health_url(url: str) -> str:
    """The ``/health`` next to a serve's ``…/mcp`` URL."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/health", "", ""))


def health(url: str, headers: Mapping[str, str], timeout: float = 2.0) -> Health:
    """``GET /health`` of the serve at `url` (its ``/mcp`` URL) with `headers`."""
    request = urllib.request.Request(health_url(url), headers=dict(headers))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read(_MAX_BYTES)
            status = response.status
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return Health("unauthorized", f"HTTP {exc.code}")
        return Health("foreign", f"HTTP {exc.code}")
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Health("down", str(reason))
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        data = None
    if status == 200 and isinstance(data, dict) and data.get("name") == "dsh-memory-mcp" and data.get("ok") is True:
        return Health("ok", "", data)
    return Health("foreign", f"HTTP {status}")


def _key(url: str) -> tuple[str, str, int | None, str]:
    parts = urllib.parse.urlsplit(url)
    host = (parts.hostname or "").lower()
    if host in _LOOPBACK:
        host = "loopback"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    return parts.scheme, host, port, parts.path.rstrip("/") or "/"


def same_serve(a: str, b: str) -> bool:
    """Whether two serve URLs name the same endpoint (loopback names count as one host)."""
    return _key(a) == _key(b)
