"""What the command line itself writes: exit codes, stdout/stderr writes that survive a console that
cannot encode 中文 and a reader that went away (``--help | head``), and at a terminal only, colour and
a pager. stdout belongs to MCP: only ``--help``/``--version`` and the human subcommands write there.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

from dsh_memory_mcp import config
from dsh_memory_mcp.texts import msg

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
    """A text stream whose reader may go away: after the first `BrokenPipeError` it detaches and
    swallows every later write, so a command (``setup --dry-run | head -3``) runs to its end and
    exits with its own code. `buffer`, the raw stream, still raises (``export`` must know)."""

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
    """``--help``/``--version``: on a console that cannot encode 中文, to a reader that went away."""
    if sys.stdout is None:  # pragma: no cover - pythonw
        return
    harden(sys.stdout)
    stream = PipeSafe(sys.stdout)
    stream.write(text)
    stream.flush()


def write_stderr_lines(lines: Sequence[str], prefix: str = PREFIX) -> None:
    """Diagnostic lines on stderr; `prefix` marks the server's among a host's (a human command's own go without)."""
    stream = sys.stderr
    if stream is None:  # pragma: no cover - pythonw
        return
    try:
        stream.write("".join(prefix + line + "\n" for line in lines))
        stream.flush()
    except (OSError, ValueError):  # pragma: no cover - stderr closed
        pass


def harden(stream: IO[str] | None) -> None:
    """A console that cannot encode 中文 or emoji must not turn a line into a traceback: it gets
    backslash escapes instead (still valid inside JSON strings)."""
    reconfigure = getattr(stream, "reconfigure", None)
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


# ----------------------------------------------------------------------------------------------
# a person at a terminal: colour, pager


def is_terminal(stream: IO[Any] | None) -> bool:
    try:
        return stream is not None and bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def colour_wanted(stream: IO[Any] | None) -> bool:
    """Colour for `stream`: a terminal, and not turned off (https://no-color.org: any non-empty
    ``NO_COLOR``; ``TERM=dumb``). On Windows only in a terminal that says it reads ANSI (Windows
    Terminal, or one that sets ``TERM``): the old console would print the escapes."""
    env = config.environ()
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return False
    if os.name == "nt" and not (env.get("WT_SESSION") or env.get("TERM")):
        return False
    return is_terminal(stream)


#: C0/C1 controls but newline and tab: a memory's text must not drive the terminal (or the pager).
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_HEAD = re.compile(r"^((?:\[[^\]\n]*%\] )?)(\([^()\n]+ · [^()\n]+\))", re.M)
_SCORE = re.compile(r"^\[[^\]\n]*%\]", re.M)
_ID = re.compile(r"(?<=\bid=)[0-9a-f-]{8,}")
_HEADING = re.compile(r"^((?:\[[^\]\n]*%\] )?(?:\([^()\n]+ · [^()\n]+\) )?\s*)(#{1,6} \S.*)$", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*")
_CODE = re.compile(r"`[^`\n]+`")
_NOTE = re.compile(r"^(?:\u63d0\u793a|\u6ce8\u610f|Tip|Note)[:\uff1a].*$", re.M)  # 提示: / 注意: / Tip: / Note:


def _sgr(code: str) -> Callable[[re.Match[str]], str]:
    return lambda m: f"\x1b[{code}m{m.group()}\x1b[0m"


def paint(text: str, colour: bool) -> str:
    """A result for a terminal: controls made visible, and with `colour` the parts a reader looks for
    marked (head, relevance, id, markdown, notes dimmed). The words are the same as without colour."""
    text = _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    if not colour:
        return text
    text = _HEADING.sub(lambda m: m.group(1) + f"\x1b[1m{m.group(2)}\x1b[0m", text)  # before the head is marked
    text = _HEAD.sub(lambda m: m.group(1) + f"\x1b[36m{m.group(2)}\x1b[0m", text)
    text = _SCORE.sub(_sgr("32;1"), text)
    text = _ID.sub(_sgr("33"), text)
    text = _BOLD.sub(_sgr("1"), text)
    text = _CODE.sub(_sgr("35"), text)
    return _NOTE.sub(_sgr("2"), text)


def paint_note(line: str) -> str:
    """A diagnostic line on a colour terminal: an error red, a warning yellow."""
    if line.startswith("❌"):
        return f"\x1b[31m{line}\x1b[0m"
    if line.startswith("⚠️"):
        return f"\x1b[33m{line}\x1b[0m"
    return line


#: The pager when neither ``DSH_MEMORY_PAGER`` nor ``PAGER`` names one (git's choice).
DEFAULT_PAGER = "less -FRX"


def pager_command(own: str | None) -> str | None:
    """The pager for long results: `own` (``DSH_MEMORY_PAGER``; an off word turns paging off), else
    ``PAGER``, else `DEFAULT_PAGER`."""
    if own is not None:
        return None if own.strip().lower() in config.OFF_WORDS else own
    return (config.environ().get("PAGER") or "").strip() or DEFAULT_PAGER


def page(text: str, out: IO[str], command: str) -> None:
    """`text` through the pager `command` when it is taller than the terminal, else (or when the pager
    cannot start) written to `out`. Ctrl+C belongs to the pager while it runs."""
    import shlex
    import shutil
    import subprocess

    if text.count("\n") < shutil.get_terminal_size().lines - 1:
        out.write(text)
        return
    env = dict(config.environ())
    env.setdefault("LESS", "FRX")  # a bare `less` in PAGER: colour passes, a short text just prints
    env.setdefault("LV", "-c")
    out.flush()
    try:
        proc = subprocess.Popen(shlex.split(command, posix=os.name != "nt"), stdin=subprocess.PIPE, env=env)
    except (OSError, ValueError):
        out.write(text)
        return
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode(getattr(out, "encoding", None) or "utf-8", "backslashreplace"))
        proc.stdin.close()
    except OSError:  # the reader quit (`q`) before the end
        pass
    while True:
        try:
            proc.wait()
            return
        except KeyboardInterrupt:
            continue
