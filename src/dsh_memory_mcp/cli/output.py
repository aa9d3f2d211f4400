"""What the command line itself writes: the stderr prefix, exit codes, stdout/stderr writes that survive
a console that cannot encode 中文 and a reader that went away (``--help | head``).

stdout belongs to MCP: only ``--help``/``--version`` and the human subcommands write there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = [
    "EXIT_OK",
    "EXIT_STARTUP",
    "EXIT_USAGE",
    "PREFIX",
    "PROG",
    "describe",
    "flush_std",
    "harden_stderr",
    "write_stderr_lines",
    "write_stdout",
]

PROG = "dsh-memory-mcp"
PREFIX = f"[{PROG}] "

EXIT_OK = 0
EXIT_STARTUP = 1
EXIT_USAGE = 2


def write_stdout(text: str) -> None:
    stream = sys.stdout
    if stream is None:  # pragma: no cover - pythonw
        return
    try:
        try:
            stream.write(text)
        except UnicodeEncodeError:
            encoding = stream.encoding or "ascii"
            stream.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))
        stream.flush()
    except BrokenPipeError:
        # `--help | head -3`: the reader is gone; silence the flush at exit (Python docs' recipe).
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):
            pass


def write_stderr_lines(lines: Sequence[str]) -> None:
    stream = sys.stderr
    if stream is None:  # pragma: no cover - pythonw
        return
    try:
        stream.write("".join(PREFIX + line + "\n" for line in lines))
        stream.flush()
    except (OSError, ValueError):  # pragma: no cover - stderr closed
        pass


def harden_stderr() -> None:
    """A console that cannot encode 中文 or emoji must not turn a diagnostic into a traceback."""
    reconfigure = getattr(sys.stderr, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError, TypeError):  # pragma: no cover
            pass


def flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # pragma: no cover
            pass


def describe(exc: BaseException | None) -> str:
    if exc is None:
        return "未知错误"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
