"""What the command line itself writes: the stderr prefix, exit codes, stdout/stderr writes that survive
a console that cannot encode 中文 and a reader that went away (``--help | head``).

stdout belongs to MCP: only ``--help``/``--version`` and the human subcommands write there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO, Any

from dsh_memory_mcp.texts import msg

__all__ = [
    "EXIT_OK",
    "EXIT_STARTUP",
    "EXIT_USAGE",
    "PREFIX",
    "PROG",
    "PipeSafe",
    "describe",
    "detach",
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


def detach(stream: IO[Any]) -> None:
    """Point `stream`'s descriptor at the null device: the reader went away (``… | head``), so
    what is still buffered and the flush at exit go nowhere instead of raising (the Python docs'
    recipe for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


class PipeSafe:
    """A text stream whose reader may go away: after the first `BrokenPipeError` it detaches the
    descriptor and swallows every later write, so a command (``setup --dry-run | head -3``) runs to
    its end and exits with its own code. `broken` says whether that happened. `buffer` is the raw
    binary stream, which still raises (``export`` must know its output was cut)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._break()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._break()

    def _break(self) -> None:
        self.broken = True
        detach(self._stream)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


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
        detach(stream)  # `--help | head -3`: the reader is gone


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
    """``Type: message`` of an exception (a `texts.Text` when its message is one, so it can be shown in English)."""
    if exc is None:
        return msg("未知错误")
    text = str(exc)
    return msg("{kind}: {text}", kind=type(exc).__name__, text=text) if text else type(exc).__name__
