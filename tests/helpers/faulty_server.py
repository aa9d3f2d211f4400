"""The real server with one internal function replaced by one that raises: a bug injected on purpose.

Usage: ``python tests/helpers/faulty_server.py <server args…>``. `tags_arg` (tag parsing, reached by
every `memory_save`) raises `TypeError`, as in the issue's reproduction. Everything else — transport,
store, logging — is the real thing, so the fault travels the real path to the client.
"""

from __future__ import annotations

import sys

from dsh_memory_mcp.service import tools


def _broken(*_args: object, **_kwargs: object) -> list[str]:
    raise TypeError("injected fault in tag parsing")


tools.tags_arg = _broken  # type: ignore[assignment]

from dsh_memory_mcp.cli.main import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
