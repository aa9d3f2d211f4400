"""Previews for logs that show a line's shape, never its memory text (logs outlive the store's
permissions and get pasted into bug reports): JSON punctuation, keys, numbers, literals and the
value of ``"id"`` stay; other strings become ``"…"``, runs of letters outside strings ``…``.

    >>> redacted('{"id":"abcdefgh-1","content":"我喜欢吃苹果","tags":["x"]}')
    '{"id":"abcdefgh-1","content":"…","tags":["…"]}'
"""

from __future__ import annotations

import re
import threading
from collections.abc import Hashable

#: How long a preview may be (after redaction).
PREVIEW_CHARS = 80
#: Only this much of a line is looked at (a 50 MB line must not be scanned for a log message).
_SCAN_CHARS = 2_000

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[^"]+', re.DOTALL)
_KEY = re.compile(r'"[A-Za-z_$@][A-Za-z0-9_.$@-]{0,40}"')
_ID_VALUE = re.compile(r'"[A-Za-z0-9_.:-]{1,64}"')
_WORDS = re.compile(r"[^\W\d_]+")
_LITERALS = frozenset({"true", "false", "null"})


def redacted(text: str) -> str:
    """`text` with its memory text masked, at most `PREVIEW_CHARS` characters (+ "…" if cut)."""
    tokens = _TOKEN.findall(text[:_SCAN_CHARS])
    out: list[str] = []
    last_key: str | None = None
    for i, token in enumerate(tokens):
        if token.startswith('"'):
            following = tokens[i + 1].lstrip() if i + 1 < len(tokens) else ""
            if following.startswith(":") and _KEY.fullmatch(token):
                out.append(token)
                last_key = token
                continue
            if last_key == '"id"' and _ID_VALUE.fullmatch(token):
                out.append(token)
            else:
                out.append('"…"' if token.endswith('"') and len(token) > 1 else '"…')
            last_key = None
        else:
            out.append(_WORDS.sub(lambda m: m.group() if m.group() in _LITERALS else "…", token))
            if token.strip() not in (":", ""):
                last_key = None if "," in token or "{" in token else last_key
    result = "".join(out)
    cut = len(text) > _SCAN_CHARS or len(result) > PREVIEW_CHARS
    return result[:PREVIEW_CHARS] + ("…" if cut else "")


class Once:
    """Which keys were already warned about, so a repeated condition logs at WARNING once (thread-safe).
    At most `limit` keys are kept: past that, every new key counts as new each time (memory stays bounded)."""

    def __init__(self, limit: int = 1000) -> None:
        self._seen: set[Hashable] = set()
        self._lock = threading.Lock()
        self._limit = limit

    def first(self, key: Hashable) -> bool:
        """Whether `key` was not seen before (and remember it)."""
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) < self._limit:
                self._seen.add(key)
            return True
