"""Command line: argv → `Settings` → the stdio server, with Chinese diagnostics (SPEC §2).

Three promises shape this module:

* ``--help``, ``--version`` and a rejected command line import nothing heavy (no ``mcp``,
  ``numpy``, ``httpx``, no ``dsh_memory_mcp.server``) and touch nothing on disk, so they work
  when the SDK is missing or broken and leave no trace.
* The parser is hand-written and strict: argparse's prefix matching would accept ``--store`` for
  ``--storeD`` and its exit codes and English messages do not fit. A typo must never silently fall
  back to the default store (on someone's machine that means writing into an unexpected directory).
* Start-up failures are actionable Chinese diagnostics on stderr, exit 1, never a bare traceback
  (``DSH_MEMORY_DEBUG=1`` adds it). stdout belongs to MCP: nothing here prints to it except
  ``--help``/``--version`` (and, later, human subcommands).

Exit codes: 0 normal (help, version, stdin closed, SIGINT/SIGTERM), 1 start-up failure, 2 usage
error.

Subcommands: the first positional word is reserved for human subcommands (``doctor``, ``list``,
``search``, …). None exist yet, so every positional word is a usage error; adding one means an
entry in `COMMANDS` (see `Command`) — the parser already routes the first positional word there.
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
from collections.abc import Callable, Iterator, Sequence
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

SDK_REQUIREMENT = "mcp>=2.3,<3"
#: Top-level import names → the pip requirement that provides them.
_REQUIREMENTS = {
    "mcp": SDK_REQUIREMENT,
    "mcp_types": SDK_REQUIREMENT,
    "numpy": "numpy>=1.26",
    "httpx": "httpx>=0.27,<1",
    "filelock": "filelock>=3.13",
    "platformdirs": "platformdirs>=4",
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
_cli_log = logging.getLogger("dsh_memory_mcp.cli")

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


@dataclass(frozen=True)
class Command:
    """A human subcommand (`dsh-memory-mcp doctor` …): reads settings, prints to stdout, exits.

    `run` gets the parsed invocation and returns the exit code. Commands are registered in
    `COMMANDS`; the first positional word of a command line selects one.
    """

    name: str
    summary: str
    run: Callable[[Invocation], int]
    accepts_args: bool = False
    extra_options: tuple[Option, ...] = field(default_factory=tuple)


#: Registry of human subcommands; empty in 0.1.0, so any positional word is a usage error.
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


def suggest_option(word: str) -> str | None:
    """The flag `word` most likely meant, or None (`--store_dir` → `--store-dir`)."""
    name = word.partition("=")[0]
    if not name.strip("-"):
        return None
    lowered = name.lower().replace("_", "-")
    if lowered in _BY_NAME:
        return lowered
    if lowered.startswith("-") and not lowered.startswith("--") and "--" + lowered[1:] in _BY_NAME:
        return "--" + lowered[1:]
    squashed = _squash(name)
    for opt in OPTIONS:
        for candidate in opt.names:
            if _squash(candidate) == squashed and len(squashed) > 1:
                return candidate
    long_form = lowered if lowered.startswith("--") else "--" + lowered.lstrip("-")
    matches = difflib.get_close_matches(long_form, [n for n in _BY_NAME if n.startswith("--")], n=1, cutoff=0.6)
    if not matches:
        return None
    # `--storeD` is closest to the alias `--store`, but meant `--store-dir`: name the main spelling.
    return next(n for n in _BY_NAME[matches[0]].names if n.startswith("--"))


def _stray(word: str) -> UsageError:
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
            raise _stray(word)
        if word == "--":
            only_positionals = True
            continue
        name, has_inline, inline = word.partition("=")
        opt = options.get(name)
        if opt is None:
            hints = []
            guess = suggest_option(word)
            if guess is not None:
                hints.append(f"你是不是想写 {guess}?")
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
    return Invocation(
        command=command.name if command is not None else None,
        store_dir=store_dir if isinstance(store_dir, str) else None,
        project_dir=project_dir if isinstance(project_dir, str) else None,
        help=values.get("help") is True,
        version=values.get("version") is True,
        args=tuple(positionals),
    )


def _metavar_zh(opt: Option) -> str:
    return "目录" if opt.metavar == "DIR" else (opt.metavar or "值")


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
  {PROG} --help | --version

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
  2  参数错误(未知参数、多余参数、缺值),不启动服务、不碰磁盘

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
    """Import `dsh_memory_mcp.server` (the only module that imports the SDK) and return `serve`."""
    try:
        module = importlib.import_module("dsh_memory_mcp.server")
    except Exception as exc:
        raise _ImportProblem(exc) from exc
    serve = getattr(module, "serve", None)
    if not callable(serve):
        raise _ImportProblem(ImportError("dsh_memory_mcp.server 里没有 serve()", name="dsh_memory_mcp.server"))
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
        _write_stdout(help_text())
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
