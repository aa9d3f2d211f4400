"""Logging for the command line: the ``dsh_memory_mcp`` logger → stderr (prefixed) and, once the
server starts, a rotating log file in platformdirs' user log dir (created 0600: it holds store paths
and short previews). Setting up stderr touches no disk; only `configure_file_logging` does.
"""

from __future__ import annotations

import copy
import logging
import logging.handlers
import os
import sys
from typing import TextIO

from dsh_memory_mcp import texts
from dsh_memory_mcp.cli import messages
from dsh_memory_mcp.cli.messages import t
from dsh_memory_mcp.cli.output import PREFIX, PROG, describe, write_stderr_lines
from dsh_memory_mcp.store import fileio

LOG_FILE_NAME = "dsh-memory-mcp.log"
LOG_MAX_BYTES = 1_000_000
LOG_BACKUPS = 3
#: The log file (and each rotated one) is created with this mode, whatever the umask: it names
#: store paths and holds short previews of store lines, which other users must not read.
LOG_FILE_MODE = 0o600

log = logging.getLogger("dsh_memory_mcp")
_cli_log = logging.getLogger("dsh_memory_mcp.cli")


def log_file_hint() -> str:
    """Where the log file would be (for ``--help``); computes, creates nothing."""
    try:
        import platformdirs  # pure: computing the path creates nothing
    except Exception:  # pragma: no cover - platformdirs missing: help must still print
        return t("<用户日志目录>/{name}", name=LOG_FILE_NAME)
    return os.path.join(platformdirs.user_log_dir(PROG, appauthor=False), LOG_FILE_NAME)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at emit time (tests swap it; hosts never do)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        if sys.stderr is None:  # pragma: no cover - pythonw
            return
        self.stream = sys.stderr
        super().emit(record)


class LogFileHandler(logging.handlers.RotatingFileHandler):
    """Several servers (one per IDE) share one log file; a failed write or rotation says so once
    on stderr and then stays quiet instead of printing logging's own traceback every time."""

    _warned = False

    def _open(self) -> TextIO:  # type: ignore[override]
        # logging opens with the umask's mode (0644, 0666 under umask 000); create 0600 instead, and
        # tighten a file an older version left readable (best effort: it may belong to someone else).
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, LOG_FILE_MODE)
        if hasattr(os, "fchmod"):
            try:
                os.fchmod(fd, LOG_FILE_MODE)
            except OSError:
                pass
        return open(fd, "a", encoding=self.encoding, errors=self.errors)

    def handleError(self, record: logging.LogRecord) -> None:
        if self._warned:
            return
        self._warned = True
        exc = sys.exc_info()[1]
        write_stderr_lines(
            [t("⚠️ 写日志文件 {path} 失败({why}),之后的日志只输出到 stderr", path=self.baseFilename, why=describe(exc))]
        )


class LocalisedFormatter(logging.Formatter):
    """Log lines on stderr in the user's language: under an English locale a template the tables know
    (`texts.EN`, one table for the CLI's own and the layers below) is shown in English, and
    `texts.Text` arguments too. The log file keeps the Chinese lines (one language for every process
    that shares it, and for bug reports)."""

    def format(self, record: logging.LogRecord) -> str:
        if messages.english() and isinstance(record.msg, str):
            args = record.args if isinstance(record.args, tuple) else ()
            template, args = texts.english_log(record.msg, args)
            if not args and isinstance(record.msg, texts.Text):
                template = record.msg.english()
            record = copy.copy(record)
            record.msg = template
            if isinstance(record.args, tuple):
                record.args = args
        return super().format(record)


_installed: list[logging.Handler] = []
_late: list[logging.Handler] = []
#: The prefix of the stderr lines now (`configure_stderr_logging`'s), which the late handler keeps.
_prefix = [PREFIX]


class NoRecoverReminder(logging.Filter):
    """A human command's stderr without the store's "memories are missing: run recover" warning,
    which would repeat on every list, get and search; `stats` and `doctor` report them (with the
    hint), `recover` restores them, and the server still warns once per loss."""

    def filter(self, record: logging.LogRecord) -> bool:
        # How `store.shared` starts that warning (its log template, Chinese in the code).
        return not (isinstance(record.msg, str) and record.msg.startswith("作用域 %s 的文件 %s 中少了"))


def configure_stderr_logging(debug: bool, *filters: logging.Filter, prefix: str = PREFIX) -> None:
    """Root `dsh_memory_mcp` logger → stderr, each line with `prefix` (the server's `[dsh-memory-mcp] `;
    a human command's lines go without). Touches no disk."""
    _prefix[0] = prefix
    handler = StderrHandler()
    handler.setFormatter(LocalisedFormatter(prefix + "%(message)s"))
    for item in filters:  # on the handler: logger filters never see records from child loggers
        handler.addFilter(item)
    log.addHandler(handler)  # before the old ones go: a thread's line never finds the logger bare
    _drop([*_installed, *_late])
    _late.clear()
    _installed.append(handler)
    log.setLevel(logging.DEBUG if debug else logging.INFO)
    log.propagate = False


def configure_file_logging() -> None:
    """Add the rotating log file in platformdirs' user log dir; on failure warn once and go on."""
    log_dir = t("<用户日志目录>")
    try:
        import platformdirs

        log_dir = platformdirs.user_log_dir(PROG, appauthor=False)
        fileio.private_dirs(log_dir)
        path = os.path.join(log_dir, LOG_FILE_NAME)
        handler = LogFileHandler(path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
    except Exception as exc:
        log.warning("⚠️ 无法创建日志目录 %s(%s),本次日志只输出到 stderr", log_dir, describe(exc))
        return
    handler.setFormatter(logging.Formatter("%(asctime)s pid=%(process)d %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    _installed.append(handler)
    _cli_log.debug("日志文件 = %s", path)


def remove_handlers(*, only_files: bool = False) -> None:
    if not only_files and not _late and all(h in _installed for h in log.handlers):
        # After the command's handlers are gone, a warning from a thread still running (a scope
        # loaded in the background while the process exits) would reach `logging.lastResort`: no
        # prefix, never in English. This one, in place before they go, says it as they would.
        late = StderrHandler()
        late.setFormatter(LocalisedFormatter(_prefix[0] + "%(message)s"))
        late.setLevel(logging.WARNING)
        log.addHandler(late)
        _late.append(late)
    _drop([h for h in _installed if not (only_files and isinstance(h, StderrHandler))])


def _drop(handlers: list[logging.Handler]) -> None:
    for handler in handlers:
        log.removeHandler(handler)
        if handler in _installed:
            _installed.remove(handler)
        try:
            handler.close()
        except Exception:  # pragma: no cover
            pass
