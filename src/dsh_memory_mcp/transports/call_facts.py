"""The relay's project header (standard library only).

``X-DSH-Project: <absolute path, UTF-8, percent-encoded with safe="/">`` carries a relay's project to
`serve` (read from authenticated requests only; `serve` answers 400 to a value that is not an absolute
path); `X-DSH-Project-Source` says where it came from.
"""

from __future__ import annotations

import os
import urllib.parse

PROJECT_HEADER = "X-DSH-Project"
#: Where the relay's project came from (its `flag`/`env`/`cwd`), informational.
PROJECT_SOURCE_HEADER = "X-DSH-Project-Source"
PROJECT_HEADER_BYTES = PROJECT_HEADER.lower().encode("ascii")


def encode_project(path: str) -> str:
    """The header value for an absolute project path."""
    return urllib.parse.quote(path, safe="/")


def decode_project(value: str) -> str | None:
    """The absolute path in a header value, normalised; None if it is not one."""
    try:
        path = urllib.parse.unquote(value.strip(), encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return None
    if not path or "\x00" in path or not os.path.isabs(path):
        return None
    return os.path.normpath(path)
