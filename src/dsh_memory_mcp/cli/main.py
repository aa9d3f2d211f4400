"""Command line: argv → `Settings` → the stdio server, with Chinese diagnostics (SPEC §2).

Three promises shape this module:

* ``--help``, ``--version`` and a rejected command line import nothing heavy (no ``mcp``,
  ``numpy``, ``httpx``, no ``dsh_memory_mcp.transports.mcp_server``) and touch nothing on disk, so they work
  when the SDK is missing or broken and leave no trace.
* The parser is hand-written and strict: argparse's prefix matching would accept ``--store`` for
  ``--storeD`` and its exit codes and English messages do not fit. A typo must never silently fall
  back to the default store (on someone's machine that means writing into an unexpected directory).
* Start-up failures are actionable Chinese diagnostics on stderr, exit 1, never a bare traceback
  (``DSH_MEMORY_DEBUG=1`` adds it). stdout belongs to MCP: nothing here prints to it except
  ``--help``/``--version`` and the human subcommands.

Exit codes: 0 normal (help, version, stdin closed, SIGINT/SIGTERM), 1 start-up failure, 2 usage
error.

Subcommands: the first positional word selects a human subcommand (``list``, ``search``, ``get``,
``forget``, ``export``, ``import``, ``stats``, ``reembed``, ``doctor``), registered in `COMMANDS`
(see `Command`). Their bodies live in `dsh_memory_mcp.cli.commands` (and ``doctor``'s in
`dsh_memory_mcp.cli.doctor`), imported only when one actually runs, so parsing and ``--help`` stay as
light as before. Any other positional word is a usage error.
"""

from __future__ import annotations

import difflib
import errno
import importlib
import logging
import logging.handlers
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType

from dsh_memory_mcp import __version__, config, errors

__all__ = [
    "COMMANDS",
    "EXIT_OK",
    "EXIT_STARTUP",
    "EXIT_USAGE",
    "OPTIONS",
    "Command",
    "Invocation",
    "Option",
    "UsageError",
    "explain_store_problem",
    "help_text",
    "main",
    "parse_args",
]

PROG = "dsh-memory-mcp"
PREFIX = f"[{PROG}] "
TAGLINE = "把 DSH 的长期记忆库暴露成独立 MCP 服务(stdio)"

EXIT_OK = 0
EXIT_STARTUP = 1
EXIT_USAGE = 2

LOG_FILE_NAME = "dsh-memory-mcp.log"
LOG_MAX_BYTES = 1_000_000
LOG_BACKUPS = 3

#: After serve() is over, how long interpreter shutdown may wait for leftover non-daemon threads
#: before the process exits anyway (see `_arm_exit_watchdog`).
EXIT_GRACE_SECONDS = 1.0

SDK_REQUIREMENT = config.SDK_REQUIREMENT
#: Top-level import names → the pip requirement that provides them.
_REQUIREMENTS = {
    "mcp": SDK_REQUIREMENT,
    "mcp_types": SDK_REQUIREMENT,
    **dict(config.DEPENDENCIES),
}
#: The SDK's own dependencies: broken or missing, the fix is reinstalling the SDK.
_SDK_DEPENDENCIES = frozenset(
    {
        "pydantic",
        "pydantic_core",
        "pydantic_settings",
        "anyio",
        "sniffio",
        "starlette",
        "sse_starlette",
        "uvicorn",
        "httpx_sse",
        "jsonschema",
        "typing_extensions",
        "typing_inspection",
        "multipart",
        "python_multipart",
        "annotated_types",
        "opentelemetry",
    }
)

log = logging.getLogger("dsh_memory_mcp")
_cli_log = logging.getLogger("dsh_memory_mcp.cli.main")

ServeFn = Callable[[config.Settings], None]


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One flag and its aliases; `names[0]` is the spelling shown in help and messages."""

    names: tuple[str, ...]
    dest: str
    takes_value: bool = False
    metavar: str = ""
    help: str = ""


OPTIONS: tuple[Option, ...] = (
    Option(("--store-dir", "--store"), "store_dir", True, "DIR", "记忆存储目录"),
    Option(("--project", "--project-dir"), "project_dir", True, "DIR", "当前工作区目录(决定 project 作用域)"),
    Option(("-h", "--help"), "help", help="打印用法后退出(0)"),
    Option(("-v", "--version"), "version", help="打印版本后退出(0)"),
)
_BY_NAME: dict[str, Option] = {name: opt for opt in OPTIONS for name in opt.names}


@dataclass(frozen=True)
class Invocation:
    """A parsed command line. `command is None` means: run the stdio MCP server."""

    command: str | None = None
    store_dir: str | None = None
    project_dir: str | None = None
    help: bool = False
    version: bool = False
    #: Positional words after the subcommand (only a subcommand that accepts them gets any).
    args: tuple[str, ...] = ()
    #: The subcommand's own options (`Command.extra_options`) by `Option.dest`: the value, or
    #: True for a flag. Absent when not given.
    options: Mapping[str, str | bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Command:
    """A human subcommand (`dsh-memory-mcp doctor` …): reads settings, prints to stdout, exits.

    `run` gets the parsed invocation and returns the exit code. Commands are registered in
    `COMMANDS`; the first positional word of a command line selects one. `usage` is the synopsis
    shown by ``<command> --help`` (one line per form, without the program name); `details` follows it.
    """

    name: str
    summary: str
    run: Callable[[Invocation], int]
    accepts_args: bool = False
    extra_options: tuple[Option, ...] = field(default_factory=tuple)
    usage: tuple[str, ...] = ()
    details: str = ""


#: Registry of human subcommands (filled in below, after the help texts).
COMMANDS: dict[str, Command] = {}


class UsageError(Exception):
    """A command line that cannot be run: exit 2, `word` named on stderr, nothing touched."""

    def __init__(self, message: str, *, word: str, hints: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.word = word
        self.hints = tuple(hints)

    def __str__(self) -> str:
        return self.message


def _squash(name: str) -> str:
    """Spelling-insensitive key: `--Store_Dir`, `-storedir`, `--store-dir` → `storedir`."""
    return name.lower().lstrip("-").replace("_", "").replace("-", "")


def suggest_option(word: str, extra: Sequence[Option] = ()) -> str | None:
    """The flag `word` most likely meant, or None (`--store_dir` → `--store-dir`).

    `extra`: a subcommand's own options, which are candidates too.
    """
    name = word.partition("=")[0]
    if not name.strip("-"):
        return None
    options = (*OPTIONS, *extra)
    by_name = {n: opt for opt in options for n in opt.names}
    lowered = name.lower().replace("_", "-")
    if lowered in by_name:
        return lowered
    if lowered.startswith("-") and not lowered.startswith("--") and "--" + lowered[1:] in by_name:
        return "--" + lowered[1:]
    squashed = _squash(name)
    for opt in options:
        for candidate in opt.names:
            if _squash(candidate) == squashed and len(squashed) > 1:
                return candidate
    long_form = lowered if lowered.startswith("--") else "--" + lowered.lstrip("-")
    matches = difflib.get_close_matches(long_form, [n for n in by_name if n.startswith("--")], n=1, cutoff=0.6)
    if not matches:
        return None
    # `--storeD` is closest to the alias `--store`, but meant `--store-dir`: name the main spelling.
    return next(n for n in by_name[matches[0]].names if n.startswith("--"))


def _stray(word: str, command: Command | None = None) -> UsageError:
    if command is not None:
        return UsageError(
            f"子命令 {command.name} 不接受位置参数:多余的 {word}",
            word=word,
            hints=[f"用 {PROG} {command.name} --help 查看它的用法"],
        )
    hints = ["目录请用 --store-dir <目录> / --project <目录> 传,不要直接写在命令行末尾"]
    close = difflib.get_close_matches(word, list(COMMANDS), n=1, cutoff=0.6) if COMMANDS else []
    if close:
        hints.insert(0, f"你是不是想用子命令 {close[0]}?")
    if not COMMANDS:
        message = f"多余的参数 {word}:{PROG} 不接受位置参数"
    else:
        message = f"未知的子命令或多余的参数 {word}(可用子命令:{', '.join(sorted(COMMANDS))})"
    return UsageError(message, word=word, hints=hints)


def parse_args(argv: Sequence[str]) -> Invocation:
    """Parse a command line strictly; raises `UsageError` for anything it cannot run.

    Pure: reads no environment, touches no file. Both `--key value` and `--key=value` work;
    a value given as the next word may not start with `-` (so `--store-dir --help` never eats
    `--help` as a directory name); write `--store-dir=-odd-name` for such a directory.
    """
    values: dict[str, str | bool] = {}
    seen: dict[str, str] = {}
    command: Command | None = None
    positionals: list[str] = []
    options = _BY_NAME
    only_positionals = False
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if only_positionals or word == "-" or not word.startswith("-"):
            if command is None and not positionals and word in COMMANDS:
                command = COMMANDS[word]
                options = {**_BY_NAME, **{n: o for o in command.extra_options for n in o.names}}
                continue
            if command is not None and command.accepts_args:
                positionals.append(word)
                continue
            raise _stray(word, command)
        if word == "--":
            only_positionals = True
            continue
        name, has_inline, inline = word.partition("=")
        opt = options.get(name)
        if opt is None:
            hints = []
            guess = suggest_option(word, command.extra_options if command is not None else ())
            if guess is not None:
                hints.append(f"你是不是想写 {guess}?")
            if command is not None:
                hints.append(f"{command.name} 的参数见 {PROG} {command.name} --help")
            raise UsageError(f"未知参数 {word}", word=word, hints=hints)
        if opt.dest in seen:
            raise UsageError(
                f"参数 {name} 重复出现(之前已给过 {seen[opt.dest]})",
                word=name,
                hints=[f"{' / '.join(opt.names)} 只能给一次"],
            )
        seen[opt.dest] = name
        if not opt.takes_value:
            if has_inline:
                raise UsageError(f"参数 {name} 不接受值:{word}", word=word, hints=[f"只写 {name}"])
            values[opt.dest] = True
            continue
        form = f"{name} <{_metavar_zh(opt)}> 或 {name}=<{_metavar_zh(opt)}>"
        if has_inline:
            value = inline
        elif i >= len(argv):
            raise UsageError(f"参数 {name} 缺少值", word=name, hints=[f"应写成 {form}"])
        else:
            value = argv[i]
            if value.startswith("-"):
                raise UsageError(
                    f"参数 {name} 缺少值:后面紧跟的 {value} 是另一个参数,不会被当成{_metavar_zh(opt)}",
                    word=name,
                    hints=[f"应写成 {form}(名字真以 - 开头时用 {name}=<{_metavar_zh(opt)}>)"],
                )
            i += 1
        if not value.strip():
            raise UsageError(f"参数 {name} 的值为空", word=name, hints=[f"应写成 {form}"])
        values[opt.dest] = value
    store_dir = values.get("store_dir")
    project_dir = values.get("project_dir")
    extra = {o.dest for o in command.extra_options} if command is not None else set()
    return Invocation(
        command=command.name if command is not None else None,
        store_dir=store_dir if isinstance(store_dir, str) else None,
        project_dir=project_dir if isinstance(project_dir, str) else None,
        help=values.get("help") is True,
        version=values.get("version") is True,
        args=tuple(positionals),
        options={dest: value for dest, value in values.items() if dest in extra},
    )


def _metavar_zh(opt: Option) -> str:
    return _METAVARS_ZH.get(opt.metavar, opt.metavar or "值")


_METAVARS_ZH = {"DIR": "目录", "N": "数字", "SCOPE": "作用域", "KIND": "类型", "ID": "id", "TEXT": "文本"}


# --------------------------------------------------------------------------------------------
# Help and version (no SDK, no disk)
# --------------------------------------------------------------------------------------------


def _log_file_hint() -> str:
    try:
        import platformdirs  # pure: computing the path creates nothing
    except Exception:  # pragma: no cover - platformdirs missing: help must still print
        return f"<用户日志目录>/{LOG_FILE_NAME}"
    return os.path.join(platformdirs.user_log_dir(PROG, appauthor=False), LOG_FILE_NAME)


def help_text() -> str:
    """The `--help` text; its first line is `dsh-memory-mcp X.Y.Z — …`."""
    return f"""\
{PROG} {__version__} — {TAGLINE}

用法:
  {PROG} [--store-dir DIR] [--project DIR]
  python -m dsh_memory_mcp [--store-dir DIR] [--project DIR]
  {PROG} <子命令> [参数…] [--store-dir DIR] [--project DIR]
  {PROG} --help | --version

不带子命令就是 stdio MCP 服务。给人用的子命令(输出到 stdout,加 --json 输出结构化结果;
{PROG} <子命令> --help 看各自的用法):
{_command_list()}

由 IDE 的 MCP 配置启动(stdio 传输):stdout 只输出 MCP 协议消息,日志走 stderr 和日志文件。
stdin 关闭、SIGINT、SIGTERM 都会干净退出(退出码 0),自己拉起的 llama-server 一并停掉。

参数(都支持 --key value 与 --key=value 两种写法;相对路径按当前目录解析):
  --store-dir DIR, --store DIR       记忆存储目录。与 DSH 记忆插件共用记忆时必须显式给,
                                     指向插件的 storeDir。
                                     缺省:$DSH_MEMORY_STORE_DIR → ~/.dsh-memory-store
  --project DIR, --project-dir DIR   当前工作区目录,决定 project 作用域(project:<路径>)。
                                     缺省:$DSH_MEMORY_PROJECT → 当前目录
  -h, --help                         打印本帮助后退出(0)
  -v, --version                      打印版本后退出(0)
  未知参数(如 --store_dir、--storedir)、多余的位置参数、缺值都会报错退出(2),不会被忽略。

环境变量:
  DSH_MEMORY_STORE_DIR       存储目录,等价于 --store-dir(缺省 ~/.dsh-memory-store)
  DSH_MEMORY_PROJECT         工作区目录,等价于 --project(缺省 当前目录)
  DSH_MEMORY_SCOPE_ALL       1/true/yes/on ⇒ memory_save 省略 scope 时写 project 而不是 global
  DSH_MEMORY_VECTOR          off/0/false/no/disabled ⇒ 完全关闭向量,只用词法检索
  DSH_MEMORY_EMBED_ENDPOINT  已有的 embedding 服务(llama-server 或 OpenAI 兼容的 /v1/embeddings);
                             设了它就永不 spawn、永不 kill
  DSH_MEMORY_EMBED_EXE       llama-server 可执行文件(缺省 PATH 上的 llama-server)
  DSH_MEMORY_EMBED_MODEL     GGUF 嵌入模型文件;它和 DSH_MEMORY_EMBED_ENDPOINT 都没设 ⇒ 没有向量,
                             只用词法检索
  DSH_MEMORY_EMBED_PORT      自己拉起 llama-server 时用的端口(缺省 {config.DEFAULT_EMBED_PORT})
  DSH_MEMORY_EMBED_THREADS   llama-server 线程数(缺省 {config.DEFAULT_EMBED_THREADS})
  DSH_MEMORY_EMBED_POOLING   池化方式(缺省按模型推断:bge → cls,nomic → mean,Qwen3-Embedding → last);
                             池化选错会悄悄毁掉召回,换模型时务必确认
  DSH_MEMORY_DEBUG           1 ⇒ 启动失败时额外打印完整调用栈,日志含调试信息

退出码:
  0  正常退出(--help / --version;服务在 stdin 关闭或收到 SIGINT / SIGTERM 后)
  1  启动失败(存储目录不可用、缺依赖等),stderr 上有可操作的中文诊断
  2  参数错误(未知参数、未知子命令、多余参数、缺值),不启动服务、不碰磁盘
  子命令:0 成功,1 失败(工具报错、记忆库目录不存在、向量不可用……),2 参数错误

日志文件:{_log_file_hint()}(1 MB × 3 轮转)

MCP 配置示例(mcp.json;Claude Code、Cursor、Trae 等格式相同):
  {{
    "mcpServers": {{
      "dsh-memory": {{
        "command": "{PROG}",
        "args": ["--store-dir", "/path/to/.dsh-memory-store"]
      }}
    }}
  }}
  用 uvx 时:"command": "uvx", "args": ["{PROG}", "--store-dir", "/path/to/.dsh-memory-store"]
  IDE 不以工作区为当前目录时,再加 "--project", "<工作区目录>"。

验证部署(stdin 喂空,服务读到 EOF 即以 0 退出;stderr 出现「已启动 {PROG} v{__version__}(stdio)」即成功):
  echo '' | {PROG} --store-dir /tmp/dsh-probe
"""


def _command_list() -> str:
    width = max((len(name) for name in COMMANDS), default=0)
    return "\n".join(f"  {name.ljust(width)}  {cmd.summary}" for name, cmd in COMMANDS.items())


def command_help_text(command: Command) -> str:
    """``<command> --help``: synopsis, what it does, its options, the shared ones."""
    lines = [f"{PROG} {command.name} — {command.summary}", "", "用法:"]
    for form in command.usage or (command.name,):
        lines.append(f"  {PROG} {form} [--store-dir DIR] [--project DIR]")
    if command.details:
        lines += ["", command.details.rstrip("\n")]
    rows = [(", ".join(o.names) + (f" {o.metavar}" if o.takes_value else ""), o.help) for o in command.extra_options]
    rows += [
        ("--store-dir DIR, --store DIR", "记忆存储目录(缺省 $DSH_MEMORY_STORE_DIR → ~/.dsh-memory-store)"),
        ("--project DIR, --project-dir DIR", "当前工作区,决定 project 作用域(缺省 $DSH_MEMORY_PROJECT → 当前目录)"),
        ("-h, --help", "打印本帮助后退出(0)"),
    ]
    width = max(len(left) for left, _ in rows)
    lines += ["", "参数:"] + [f"  {left.ljust(width)}  {right}" for left, right in rows]
    return "\n".join(lines) + "\n"


def version_text() -> str:
    return f"{PROG} {__version__}\n"


def _write_stdout(text: str) -> None:
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


def _write_stderr_lines(lines: Sequence[str]) -> None:
    stream = sys.stderr
    if stream is None:  # pragma: no cover - pythonw
        return
    try:
        stream.write("".join(PREFIX + line + "\n" for line in lines))
        stream.flush()
    except (OSError, ValueError):  # pragma: no cover - stderr closed
        pass


def _harden_stderr() -> None:
    """A console that cannot encode 中文 or emoji must not turn a diagnostic into a traceback."""
    reconfigure = getattr(sys.stderr, "reconfigure", None)
    if reconfigure is not None:
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError, TypeError):  # pragma: no cover
            pass


# --------------------------------------------------------------------------------------------
# Logging: stderr (prefixed) + rotating file, set up only when the server starts
# --------------------------------------------------------------------------------------------


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is at emit time (tests swap it; hosts never do)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        if sys.stderr is None:  # pragma: no cover - pythonw
            return
        self.stream = sys.stderr
        super().emit(record)


class _LogFileHandler(logging.handlers.RotatingFileHandler):
    """Several servers (one per IDE) share one log file; a failed write or rotation says so once
    on stderr and then stays quiet instead of printing logging's own traceback every time."""

    _warned = False

    def handleError(self, record: logging.LogRecord) -> None:
        if self._warned:
            return
        self._warned = True
        exc = sys.exc_info()[1]
        _write_stderr_lines([f"⚠️ 写日志文件 {self.baseFilename} 失败({_describe(exc)}),之后的日志只输出到 stderr"])


_installed: list[logging.Handler] = []


def _configure_stderr_logging(debug: bool, *filters: logging.Filter) -> None:
    """Root `dsh_memory_mcp` logger → stderr with the `[dsh-memory-mcp] ` prefix. Touches no disk."""
    _remove_handlers()
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(PREFIX + "%(message)s"))
    for item in filters:  # on the handler: logger filters never see records from child loggers
        handler.addFilter(item)
    log.addHandler(handler)
    _installed.append(handler)
    log.setLevel(logging.DEBUG if debug else logging.INFO)
    log.propagate = False


def _configure_file_logging() -> None:
    """Add the rotating log file in platformdirs' user log dir; on failure warn once and go on."""
    log_dir = "<用户日志目录>"
    try:
        import platformdirs

        log_dir = platformdirs.user_log_dir(PROG, appauthor=False)
        os.makedirs(log_dir, exist_ok=True)
        path = os.path.join(log_dir, LOG_FILE_NAME)
        handler = _LogFileHandler(path, maxBytes=LOG_MAX_BYTES, backupCount=LOG_BACKUPS, encoding="utf-8")
    except Exception as exc:
        log.warning("⚠️ 无法创建日志目录 %s(%s),本次日志只输出到 stderr", log_dir, _describe(exc))
        return
    handler.setFormatter(logging.Formatter("%(asctime)s pid=%(process)d %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    _installed.append(handler)
    _cli_log.debug("日志文件 = %s", path)


def _remove_handlers(*, only_files: bool = False) -> None:
    for handler in list(_installed):
        if only_files and isinstance(handler, _StderrHandler):
            continue
        log.removeHandler(handler)
        _installed.remove(handler)
        try:
            handler.close()
        except Exception:  # pragma: no cover
            pass


def _describe(exc: BaseException | None) -> str:
    if exc is None:
        return "未知错误"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------------------------
# Signals and exit
# --------------------------------------------------------------------------------------------


#: After the first SIGINT/SIGTERM, how long the graceful stop (end of stdin) may take before the
#: main thread gets a KeyboardInterrupt.
STOP_ESCALATION_SECONDS = 5.0
#: After the first SIGINT/SIGTERM, when the process exits no matter what (a shutdown that hangs,
#: e.g. an event loop waiting for a task that ignores cancellation, must not outlive the request).
HARD_EXIT_SECONDS = 10.0

_SignalHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


class _StdinRelay:
    """Feeds the server's stdin (fd 0) from the real stdin through a pipe this process owns.

    Why: the SDK reads stdin in a worker thread that cancellation cannot interrupt, so while the
    host (or a terminal) keeps stdin open, neither Ctrl+C nor SIGTERM could end the event loop.
    With the relay, a signal closes our pipe: the server sees end of input, exactly as when the
    host closes stdin, and shuts down through its normal path (its `finally` stops children and
    flushes pending writes). POSIX only (`select` on the real stdin).
    """

    def __init__(self, source: int, sink: int, wake_r: int, wake_w: int) -> None:
        self._source = source
        self._sink = sink
        self._wake_r = wake_r
        self._wake_w = wake_w

    @classmethod
    def install(cls) -> _StdinRelay | None:
        if os.name != "posix":
            return None
        try:
            source = os.dup(0)
        except OSError:  # no stdin at all
            return None
        try:
            read_end, write_end = os.pipe()
            wake_r, wake_w = os.pipe()
            os.set_blocking(wake_w, False)
            os.dup2(read_end, 0)  # fd 0 is now our pipe; sys.stdin still wraps fd 0
            os.close(read_end)
        except OSError:  # pragma: no cover - fd exhaustion
            os.close(source)
            return None
        relay = cls(source, write_end, wake_r, wake_w)
        threading.Thread(target=relay._pump, name="dsh-memory-mcp-stdin-relay", daemon=True).start()
        return relay

    def _pump(self) -> None:
        import select

        try:
            while True:
                ready, _, _ = select.select([self._source, self._wake_r], [], [])
                if self._wake_r in ready:
                    break
                try:
                    data = os.read(self._source, 65536)
                except BlockingIOError:  # a host handed us a non-blocking stdin: not an end of input
                    continue
                if not data:
                    break
                view = memoryview(data)
                while view:
                    view = view[os.write(self._sink, view) :]
        except (OSError, ValueError):
            pass
        finally:
            for fd in (self._sink, self._source, self._wake_r):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def stop(self) -> None:
        """End the server's input. Async-signal-safe: a single non-blocking write."""
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass


class _SignalGuard:
    """SIGINT and SIGTERM while the server runs: a clean stop, exit code 0.

    1st signal: end the server's stdin through the relay (graceful, like the host closing the
    pipe); without a relay, or if that has not finished after `STOP_ESCALATION_SECONDS`:
    KeyboardInterrupt in the main thread (caught around serve → exit 0). A 3rd signal, or
    `HARD_EXIT_SECONDS` after the 1st, ends the process at once.
    """

    def __init__(self) -> None:
        self.count = 0
        self.relay: _StdinRelay | None = None
        self._previous: dict[int, _SignalHandler] = {}
        self._timers: list[threading.Timer] = []

    def install(self) -> None:
        for sig in _stop_signals():
            try:
                current = signal.getsignal(sig)
                if current is signal.SIG_IGN:  # e.g. started in the background by a shell: keep ignoring
                    continue
                self._previous[sig] = signal.signal(sig, self._handle)
            except (ValueError, OSError):  # not the main thread
                pass

    def restore(self) -> None:
        self.cancel_escalation()
        for sig, previous in self._previous.items():
            try:
                signal.signal(sig, previous)
            except (ValueError, OSError, TypeError):  # pragma: no cover
                pass
        self._previous.clear()

    def cancel_escalation(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    def _later(self, seconds: float, action: Callable[..., object], *args: object) -> None:
        timer = threading.Timer(seconds, action, args=args)
        timer.daemon = True
        timer.start()
        self._timers.append(timer)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.count == 1:
            self._later(HARD_EXIT_SECONDS, _hard_exit)
            if self.relay is not None:
                self.relay.stop()
                self._later(STOP_ESCALATION_SECONDS, _interrupt_main, signum)
                return
        if self.count <= 2:
            raise KeyboardInterrupt
        _flush_std()
        os._exit(EXIT_OK)


def _hard_exit() -> None:
    _write_stderr_lines([f"⚠️ 收到退出信号 {HARD_EXIT_SECONDS:g} 秒后仍未停下,强制退出"])
    _flush_std()
    os._exit(EXIT_OK)


def _interrupt_main(signum: int) -> None:
    import _thread

    _thread.interrupt_main(signal.Signals(signum))  # our handler again, in the main thread: escalation


def _stop_signals() -> list[int]:
    return [sig for sig in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if sig is not None]


def _quiet_late_signals(code: int) -> None:
    """Once serve() is over, a further SIGINT/SIGTERM ends the process at once with `code`
    (no KeyboardInterrupt traceback from inside interpreter shutdown)."""

    def _exit_now(signum: int, frame: FrameType | None) -> None:
        _flush_std()
        os._exit(code)

    for sig in _stop_signals():
        try:
            current = signal.getsignal(sig)
            if current is signal.SIG_IGN:
                continue
            signal.signal(sig, _exit_now)
        except (ValueError, OSError):  # pragma: no cover - not the main thread
            pass


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:  # pragma: no cover
            pass


def _arm_exit_watchdog(code: int, grace: float = EXIT_GRACE_SECONDS) -> None:
    """Make sure the process really exits after serve() returned (a safety net).

    Interpreter shutdown waits for every non-daemon thread; one that never ends (the SDK's stdin
    reader when we were interrupted without the relay, e.g. on Windows, or a stuck worker) would
    keep a dead server alive forever. A daemon thread waits for the main thread to finish
    (interpreter shutdown has begun), gives leftover threads `grace` seconds, then `os._exit`s.
    Inert while the main thread lives (tests calling `main()` in-process are unaffected).
    """
    main_thread = threading.main_thread()

    def leftovers() -> list[threading.Thread]:
        me = threading.current_thread()
        return [t for t in threading.enumerate() if t not in (main_thread, me) and not t.daemon and t.is_alive()]

    if not leftovers():
        return

    def watch() -> None:
        while main_thread.is_alive():
            time.sleep(0.05)
        deadline = time.monotonic() + grace
        for thread in leftovers():
            thread.join(max(0.0, deadline - time.monotonic()))
        if leftovers():
            _flush_std()
            os._exit(code)

    threading.Thread(target=watch, name="dsh-memory-mcp-exit-watchdog", daemon=True).start()


# --------------------------------------------------------------------------------------------
# Start-up diagnostics
# --------------------------------------------------------------------------------------------


def explain_store_problem(path: str, error: BaseException | None = None) -> str | None:
    """Why `path` cannot serve as the store directory, in Chinese; None when nothing specific is found.

    Looks at the filesystem (creates nothing) and at the errno of `error`: drive missing, path is a
    file, a parent is missing or is a file, no write permission, read-only filesystem, disk full.
    """
    try:
        drive = os.path.splitdrive(path)[0]
        if drive and len(drive) == 2 and drive[1] == ":" and not os.path.exists(drive + os.sep):
            return f"盘符 {drive.upper()} 不存在(这台机器上没有这个盘)"
        if os.path.lexists(path) and not os.path.isdir(path):
            return f"路径已存在,但它是个文件,不是目录:{path}"
        parent = os.path.dirname(os.path.normpath(path)) or os.curdir
        if not os.path.isdir(path):
            ancestor = parent
            while not os.path.lexists(ancestor) and os.path.dirname(ancestor) != ancestor:
                ancestor = os.path.dirname(ancestor)
            if os.path.lexists(ancestor) and not os.path.isdir(ancestor):
                return f"路径中的 {ancestor} 是个文件,不是目录"
            if not os.path.isdir(parent):
                return f"父目录不存在:{parent}"
        code = getattr(error, "errno", None)
        target = path if os.path.isdir(path) else parent
        if code in (errno.EACCES, errno.EPERM):
            return f"没有写入权限:{target}"
        if code == errno.EROFS:
            return f"所在文件系统是只读的:{target}"
        if code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return f"磁盘空间或配额已满:{target}"
        if not os.access(target, os.W_OK):
            return f"没有写入权限:{target}"
    except (OSError, ValueError):
        pass
    return None


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside (nested) exception groups, or `exc` itself."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, tuple) and type(exc).__name__.endswith("ExceptionGroup"):
        for item in inner:
            if isinstance(item, BaseException):
                yield from _leaves(item)
    else:
        yield exc


def _is_interrupt(exc: BaseException) -> bool:
    if isinstance(exc, KeyboardInterrupt):
        return True
    return type(exc).__name__ == "CancelledError"


def _store_failure(exc: BaseException, settings: config.Settings) -> tuple[str, OSError] | None:
    """(path, error) when `exc` means the store directory is unusable."""
    if isinstance(exc, errors.StoreError):
        return (exc.path or settings.store_dir), exc
    if isinstance(exc, OSError) and exc.filename:
        filename = os.path.normpath(os.path.abspath(os.fsdecode(exc.filename)))
        store = os.path.normpath(settings.store_dir)
        if filename == store or filename.startswith(store + os.sep) or store.startswith(filename + os.sep):
            return filename, exc
    return None


def _debug_lines(exc: BaseException, settings_debug: bool) -> list[str]:
    if settings_debug:
        return ["调用栈(DSH_MEMORY_DEBUG=1):\n" + "".join(traceback.format_exception(exc)).rstrip()]
    return []


def _report_store_failure(path: str, error: OSError, settings: config.Settings, top: BaseException) -> None:
    original: BaseException = error
    if isinstance(error, errors.StoreError) and isinstance(error.__cause__, BaseException):
        original = error.__cause__
    # Our own short reason first (the StoreError's message is often a whole sentence that repeats
    # the path and the fix); the error's own words when the filesystem shows nothing specific.
    reason = explain_store_problem(path, original)
    if reason is None:
        if isinstance(error, errors.StoreError) and error.message.strip():
            reason = error.message.strip()
        elif isinstance(original, OSError) and original.strerror:
            reason = original.strerror
        else:
            reason = _describe(original)
    lines = [
        f"❌ 启动失败:记忆存储目录不可用:{path}",
        f"⇒ 原因:{reason}",
        "⇒ 改 --store-dir(或环境变量 DSH_MEMORY_STORE_DIR)指向一个已存在且可写的目录;"
        f"默认是 {config.default_store_dir()}",
        f"原始错误:{_describe(original)}",
        *_debug_lines(top, settings.debug),
    ]
    for line in lines:
        log.error("%s", line)


def _report_unexpected(exc: BaseException, debug: bool, *, started: bool, top: BaseException | None = None) -> None:
    what = "服务异常退出" if started else "启动失败"
    hint = "" if debug else "(设 DSH_MEMORY_DEBUG=1 可看完整调用栈)"
    log.error("❌ %s:意外错误 %s%s", what, _describe(exc), hint)
    for line in _debug_lines(top or exc, debug):
        log.error("%s", line)


class _ImportProblem(Exception):
    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _load_serve() -> ServeFn:
    """Import `dsh_memory_mcp.transports.mcp_server` (the only module that imports the SDK) and return `serve`."""
    try:
        module = importlib.import_module("dsh_memory_mcp.transports.mcp_server")
    except Exception as exc:
        raise _ImportProblem(exc) from exc
    serve = getattr(module, "serve", None)
    if not callable(serve):
        name = "dsh_memory_mcp.transports.mcp_server"
        raise _ImportProblem(ImportError(f"{name} 里没有 serve()", name=name))
    return serve  # type: ignore[no-any-return]


def _third_party_modules(exc: BaseException) -> list[str]:
    """Module names in the traceback outside this package and the import machinery, outermost first."""
    names: list[str] = []
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_globals.get("__name__")
        if (
            isinstance(name, str)
            and name
            and not name.startswith(("dsh_memory_mcp", "importlib", "_frozen_importlib"))
            and name not in names
        ):
            names.append(name)
        tb = tb.tb_next
    return names


def _report_import_problem(problem: _ImportProblem, debug: bool) -> None:
    exc = problem.cause
    missing = exc.name if isinstance(exc, ImportError) and exc.name else None
    frames = _third_party_modules(exc)
    culprit = missing or (frames[-1] if frames else None)
    outer = frames[0] if frames else culprit
    python = sys.executable or "python"
    reinstall = (
        f"重装本包(依赖会一并装好):pip install {PROG} --force-reinstall"
        f"(pipx 装的:pipx reinstall {PROG};uvx:uvx --refresh {PROG};源码仓库里:pip install -e .)"
    )
    if culprit is None or culprit.split(".")[0] == "dsh_memory_mcp":
        if culprit is not None or isinstance(exc, ImportError):
            lines = [f"❌ 启动失败:{PROG} 安装不完整,找不到 {culprit or '服务模块'}", f"⇒ 修复:{reinstall}"]
        else:
            lines = [
                f"❌ 启动失败:加载服务模块时出错(多半是 {PROG} 自身的问题,请附上 DSH_MEMORY_DEBUG=1 的输出报告)",
                f"⇒ 可以先试试{reinstall}",
            ]
    else:
        top = culprit.split(".")[0]
        via = outer.split(".")[0] if outer else top
        sdk = top in ("mcp", "mcp_types") or top in _SDK_DEPENDENCIES or via in ("mcp", "mcp_types")
        requirement = _REQUIREMENTS.get(top, SDK_REQUIREMENT if sdk else top)
        what = "MCP Python SDK 或它的依赖" if sdk else "运行依赖"
        state = "缺失" if isinstance(exc, ModuleNotFoundError) else "已损坏(导入时出错)"
        detail = f"{top}" + (f"(导入 {via} 时)" if via != top else "")
        lines = [
            f"❌ 启动失败:{what}{state}:{detail}",
            f'⇒ 修复:pip install "{requirement}"(在运行 {PROG} 的同一个 Python 环境里执行,即 {python} -m pip …;'
            "已装过但坏了就加 --force-reinstall)",
        ]
        if sdk and requirement != SDK_REQUIREMENT:
            lines.append(f'⇒ 也可以直接重装 SDK:pip install --force-reinstall "{SDK_REQUIREMENT}"')
        lines.append(f"⇒ 或者{reinstall}")
    lines.append(f"原始错误:{_describe(exc)}")
    lines.extend(_debug_lines(exc, debug))
    for line in lines:
        log.error("%s", line)


class _StartedFlag(logging.Filter):
    """Notices the server's `已启动 …` line, so a later crash is not called a start-up failure."""

    def __init__(self) -> None:
        super().__init__()
        self.started = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.started and isinstance(record.msg, str) and record.msg.startswith("已启动"):
            self.started = True
        return True


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None, *, serve: ServeFn | None = None) -> int:
    """Run the command line; returns the exit code (the caller `sys.exit`s it).

    `serve` is a seam for tests of start-up diagnostics; by default the real
    `dsh_memory_mcp.server.serve` is imported lazily, only when the server actually starts, and
    `main` then owns the process (signal handling through interpreter shutdown).
    """
    _harden_stderr()
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        invocation = parse_args(words)
    except UsageError as exc:
        _write_stderr_lines(
            [f"❌ 参数错误:{exc.message}", *(f"⇒ {hint}" for hint in exc.hints), "⇒ 用 --help 查看用法"]
        )
        return EXIT_USAGE
    if invocation.help:
        command = COMMANDS.get(invocation.command) if invocation.command is not None else None
        _write_stdout(command_help_text(command) if command is not None else help_text())
        return EXIT_OK
    if invocation.version:
        _write_stdout(version_text())
        return EXIT_OK
    if invocation.command is not None:
        return COMMANDS[invocation.command].run(invocation)
    return _run_server(invocation, serve)


def _run_server(invocation: Invocation, serve: ServeFn | None) -> int:
    owns_process = serve is None
    guard = _SignalGuard()
    guard.install()
    started = _StartedFlag()
    code = EXIT_STARTUP
    try:
        try:
            code = _start(invocation, serve, started, guard)
        except KeyboardInterrupt:
            code = EXIT_OK
            _cli_log.info("收到退出信号,已停止")
    except KeyboardInterrupt:  # a second signal while reporting the first
        code = EXIT_OK
    finally:
        guard.restore()
        if owns_process:
            _quiet_late_signals(code)
            _arm_exit_watchdog(code)
        _remove_handlers(only_files=True)
    return code


def _start(invocation: Invocation, serve: ServeFn | None, started: _StartedFlag, guard: _SignalGuard) -> int:
    debug = config.env_flag(os.environ.get("DSH_MEMORY_DEBUG"))
    _configure_stderr_logging(debug, started)
    try:
        settings = config.resolve_settings(store_dir=invocation.store_dir, project_dir=invocation.project_dir)
    except Exception as exc:
        _report_unexpected(exc, debug, started=False)
        return EXIT_STARTUP
    _configure_file_logging()
    _cli_log.info("store-dir = %s", settings.store_dir)
    _cli_log.info("project = %s(project 作用域 = project:%s)", settings.project_dir, settings.project_dir)
    _cli_log.info("默认保存作用域 = %s", settings.default_save_scope)
    if settings.store_dir_is_default:
        _cli_log.info("ℹ️ 未指定 --store-dir / DSH_MEMORY_STORE_DIR,使用默认目录:%s", settings.store_dir)
        _cli_log.info("⇒ 请确认它与 DSH 记忆插件的 storeDir 是同一个目录,否则两边看到的是两份互不相通的记忆。")
    if serve is None:
        try:
            serve = _load_serve()
        except _ImportProblem as problem:
            _report_import_problem(problem, settings.debug)
            return EXIT_STARTUP
        # We own the process: signals end the session through the stdin relay (see _StdinRelay).
        guard.relay = _StdinRelay.install()
    try:
        serve(settings)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:
        leaves = list(_leaves(exc))
        if leaves and all(_is_interrupt(leaf) for leaf in leaves):
            raise KeyboardInterrupt from exc
        for leaf in leaves:
            failure = _store_failure(leaf, settings)
            if failure is not None:
                _report_store_failure(failure[0], failure[1], settings, exc)
                return EXIT_STARTUP
        culprit = next((leaf for leaf in leaves if not _is_interrupt(leaf)), exc)
        _report_unexpected(culprit, settings.debug, started=started.started, top=exc)
        return EXIT_STARTUP
    if guard.count:
        _cli_log.info("收到退出信号,已停止")
    else:
        _cli_log.debug("stdin 已关闭,正常退出")
    return EXIT_OK


# --------------------------------------------------------------------------------------------
# Human subcommands: registered here, bodies in `dsh_memory_mcp.cli.commands` (imported on use)
# --------------------------------------------------------------------------------------------

#: Exit code of a subcommand interrupted by Ctrl+C (the shell convention, 128 + SIGINT).
EXIT_INTERRUPTED = 130


def _run_command(name: str, invocation: Invocation) -> int:
    """Resolve settings, import the command bodies, run one; never a bare traceback."""
    debug = config.env_flag(os.environ.get("DSH_MEMORY_DEBUG"))
    _configure_stderr_logging(debug)
    # A human command prints its own results; only the store's and vector channel's warnings
    # (corrupt lines, backend trouble) come through the logger.
    log.setLevel(logging.DEBUG if debug else logging.WARNING)
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        # A console that cannot encode 中文 gets \uXXXX escapes (still valid inside JSON strings).
        try:
            reconfigure(errors="backslashreplace")
        except (ValueError, OSError, TypeError):  # pragma: no cover
            pass
    try:
        settings = config.resolve_settings(store_dir=invocation.store_dir, project_dir=invocation.project_dir)
        try:
            from dsh_memory_mcp.cli import commands
        except Exception as exc:
            raise _ImportProblem(exc) from exc
        return commands.run(name, invocation.args, invocation.options, settings, out=sys.stdout, err=sys.stderr)
    except _ImportProblem as problem:
        _report_import_problem(problem, debug)
        return EXIT_STARTUP
    except KeyboardInterrupt:
        _write_stderr_lines(["已中断(Ctrl+C)"])
        return EXIT_INTERRUPTED
    except Exception as exc:
        hint = "" if debug else "(设 DSH_MEMORY_DEBUG=1 可看完整调用栈)"
        _write_stderr_lines([f"❌ {name} 失败:意外错误 {_describe(exc)}{hint}", *_debug_lines(exc, debug)])
        return EXIT_STARTUP
    finally:
        _flush_std()
        _remove_handlers()


def _runner(name: str) -> Callable[[Invocation], int]:
    def run(invocation: Invocation) -> int:
        return _run_command(name, invocation)

    run.__name__ = f"run_{name}"
    return run


_JSON = Option(("--json",), "json", help="输出 JSON(与 MCP 工具的 structuredContent 相同)而不是文本")
_SCOPE = Option(
    ("--scope",),
    "scope",
    True,
    "SCOPE",
    "作用域:global / project / project:<路径> / session:<id> / 自定义名 / all",
)
_PATH = Option(("--path",), "path", True, "DIR", "按工作区路径指定作用域(等价于 project:<路径>)")
_KIND = Option(("--kind",), "kind", True, "KIND", "只看一种:fact / decision / preference / procedure / note / rule")
_LIMIT = Option(("--limit",), "limit", True, "N", "最多显示几条,1~200(缺省 50),最新的在前")
_TOPK = Option(("--top-k", "--topk"), "top_k", True, "N", "最多返回几条,1~20(缺省 5)")
_ID = Option(("--id",), "id", True, "ID", "要删除的记忆 id(完整 id 或至少 8 位前缀,任意作用域)")
_QUERY = Option(("--query",), "query", True, "TEXT", "删除内容包含该文本的记忆(只在一个作用域内,缺省当前项目)")

_SCOPE_NOTE = "--scope 与 --path 的规则与 MCP 工具的 scope / path 参数完全相同(见 README「作用域」)。"

for _command in (
    Command(
        "list",
        "列出记忆(最新在前)",
        _runner("list"),
        extra_options=(_SCOPE, _PATH, _KIND, _LIMIT, _JSON),
        usage=("list [--scope SCOPE | --path DIR] [--kind KIND] [--limit N] [--json]",),
        details="与 memory_list 工具相同:缺省列出当前项目 + global 的有效记忆(过期/被取代的不显示)。\n" + _SCOPE_NOTE,
    ),
    Command(
        "search",
        "检索记忆",
        _runner("search"),
        accepts_args=True,
        extra_options=(_SCOPE, _PATH, _TOPK, _JSON),
        usage=("search 查询词… [--scope SCOPE | --path DIR] [--top-k N] [--json]",),
        details="与 memory_search 工具相同(多个词用空格连成一句查询)。向量检索只用已在运行的嵌入服务\n"
        "(DSH_MEMORY_EMBED_ENDPOINT,或端口上已在运行的 llama-server),从不为一次检索拉起 llama-server;\n"
        "后端没就绪就只用词法检索。命中会像工具一样累加 accessCount。\n" + _SCOPE_NOTE,
    ),
    Command(
        "get",
        "按 id 取完整记忆",
        _runner("get"),
        accepts_args=True,
        extra_options=(_JSON,),
        usage=("get ID [ID …] [--json]",),
        details="与 memory_get 工具相同:完整 id 或至少 8 位前缀,任意作用域,过期记录也能取到。",
    ),
    Command(
        "forget",
        "删除记忆",
        _runner("forget"),
        accepts_args=True,
        extra_options=(_ID, _QUERY, _SCOPE, _PATH, _JSON),
        usage=(
            "forget ID [--json]",
            "forget --id ID [--json]",
            "forget --query 文本 [--scope SCOPE | --path DIR] [--json]",
        ),
        details="与 memory_forget 工具相同:按 id 删一条(任意作用域),或按内容子串在一个作用域内批量删除\n"
        "(缺省当前项目;不能用 all)。没有确认提示,删之前可以先 export 备份。",
    ),
    Command(
        "export",
        "导出全部记忆为 JSONL(stdout)",
        _runner("export"),
        extra_options=(_SCOPE, _PATH),
        usage=("export [--scope SCOPE | --path DIR] > backup.jsonl",),
        details="每个作用域的每条记录(含已过期/被取代的)按磁盘上的原样输出一行,是无损备份,可用 import 恢复。\n"
        "解析不了的损坏行不导出(仍留在记忆库文件里),数目报告在 stderr。缺省导出所有作用域。",
    ),
    Command(
        "import",
        "从 JSONL 导入记忆",
        _runner("import"),
        accepts_args=True,
        extra_options=(_SCOPE, _PATH),
        usage=("import FILE [--scope SCOPE | --path DIR]", "import - < backup.jsonl"),
        details="逐行自动识别两种格式:\n"
        "  1. 本服务 export 的记录行:原样写回它自己的作用域(id 与所有字段保留);\n"
        "     id 已存在、或同一作用域已有相同内容的有效记忆 → 记为「已存在」,不重复写入。\n"
        '  2. 官方 MCP memory 服务器的知识图谱 JSONL({"type":"entity",…} / {"type":"relation",…}):\n'
        "     每条 observation 成为一条记忆「<name>: <observation>」(kind=fact,tags=[entityType, mcp-memory-import]),\n"
        "     每条关系成为一条记忆「<from> <relationType> <to>」(kind=fact,tags=[relation, mcp-memory-import]),\n"
        "     写入 --scope / --path 指定的作用域(缺省 global)。\n"
        "无效行在 stderr 报出行号并跳过,不影响其它行。FILE 为 - 时读标准输入。",
    ),
    Command(
        "stats",
        "记忆库统计:每个作用域的记录数、过期数、损坏行、文件大小、向量",
        _runner("stats"),
        extra_options=(_SCOPE, _PATH, _JSON),
        usage=("stats [--scope SCOPE | --path DIR] [--json]",),
        details="缺省统计磁盘上的所有作用域。只读:不加锁、不写任何文件、不连嵌入服务。",
    ),
    Command(
        "reembed",
        "用当前嵌入模型重建向量边车(.vec)",
        _runner("reembed"),
        accepts_args=True,
        extra_options=(_SCOPE, _PATH),
        usage=("reembed [SCOPE …] [--scope SCOPE | --path DIR]",),
        details="为每条有效记录重新计算向量并整份重写 .vec(缺省所有作用域),进度条输出到 stderr。\n"
        "需要可用的向量后端(DSH_MEMORY_EMBED_ENDPOINT,或 DSH_MEMORY_EMBED_MODEL + llama-server;\n"
        "后者没在运行时会临时拉起,结束时停掉)。",
    ),
    Command(
        "doctor",
        "检查安装、配置、记忆库与向量后端",
        _runner("doctor"),
        usage=("doctor",),
        details="只读:不建目录、不写文件、不启动进程。有问题时退出码 1。",
    ),
):
    COMMANDS[_command.name] = _command
