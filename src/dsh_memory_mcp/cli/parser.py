"""The strict command-line parser and the help texts (docs/design.md: Command line); pure: no
environment, no disk, no SDK. Hand-written: argparse's prefix matching would take ``--store`` for
``--storeD``, and a typo must never silently fall back to the default store. The subcommand table
lives in `registry`; functions here take it as an argument.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dsh_memory_mcp import __version__, config
from dsh_memory_mcp.cli.logs import log_file_hint
from dsh_memory_mcp.cli.messages import HELP_ZH, N_, english, t
from dsh_memory_mcp.cli.output import PROG

TAGLINE = N_("把 DSH 的长期记忆库暴露成独立 MCP 服务(stdio)")


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


#: Never part of a directory or URL: C0/C1 controls, DEL, the line/paragraph separators and lone
#: surrogates (bytes that are not UTF-8). In a systemd unit a newline starts a new directive.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def control_char(text: str) -> str | None:
    """The first control character in `text`, shown as ``U+000A``; None when it has none."""
    match = _CONTROL.search(text)
    return f"U+{ord(match.group()):04X}" if match else None


@dataclass(frozen=True)
class Option:
    """One flag and its aliases; `names[0]` is the spelling shown in help and messages."""

    names: tuple[str, ...]
    dest: str
    takes_value: bool = False
    metavar: str = ""
    help: str = ""


OPTIONS: tuple[Option, ...] = (
    Option(("--store-dir", "--store"), "store_dir", True, "DIR", N_("记忆存储目录")),
    Option(("--project", "--project-dir"), "project_dir", True, "DIR", N_("当前工作区目录(决定 project 作用域)")),
    Option(("--no-relay",), "no_relay", help=N_("不转发给运行中的 serve,直接打开记忆库(直连模式)")),
    Option(("-h", "--help"), "help", help=N_("打印用法后退出(0)")),
    Option(("-v", "--version"), "version", help=N_("打印版本后退出(0)")),
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
    #: `--no-relay`: never relay to a running `serve`, open the store directly.
    no_relay: bool = False
    #: Positional words after the subcommand (only a subcommand that accepts them gets any).
    args: tuple[str, ...] = ()
    #: The subcommand's own options (`Command.extra_options`) by `Option.dest`: the value, or
    #: True for a flag. Absent when not given.
    options: Mapping[str, str | bool] = field(default_factory=dict)


@dataclass(frozen=True)
class Command:
    """A human subcommand (`dsh-memory-mcp doctor` …): reads settings, prints to stdout, exits.

    `run` gets the parsed invocation and returns the exit code. Commands are registered in
    `dsh_memory_mcp.cli.registry.COMMANDS`; the first positional word of a command line selects one.
    `usage` is the synopsis shown by ``<command> --help`` (one line per form, without the program
    name); `details` follows it.
    """

    name: str
    summary: str
    run: Callable[[Invocation], int]
    accepts_args: bool = False
    extra_options: tuple[Option, ...] = field(default_factory=tuple)
    usage: tuple[str, ...] = ()
    #: Paragraphs (each a `messages.N_` template) or one string.
    details: str | tuple[str, ...] = ""


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


#: Words people try for a subcommand by another name (`add` for `save`): the hint names ours.
_SYNONYMS = {
    "add": "save",
    "new": "save",
    "remember": "save",
    "put": "save",
    "find": "search",
    "query": "search",
    "ls": "list",
    "show": "get",
    "cat": "get",
    "delete": "forget",
    "remove": "forget",
    "rm": "forget",
    "del": "forget",
    "check": "doctor",
    "install": "setup",
    "restore": "recover",
}


def _stray(word: str, command: Command | None, commands: Mapping[str, Command]) -> UsageError:
    if command is not None:
        return UsageError(
            t("子命令 {command} 不接受位置参数:多余的 {word}", command=command.name, word=word),
            word=word,
            hints=[t("用 {prog} {command} --help 查看它的用法", command=command.name)],
        )
    hints = [t("目录请用 --store-dir <目录> / --project <目录> 传,不要直接写在命令行末尾")]
    synonym = _SYNONYMS.get(word.lower())
    close = difflib.get_close_matches(word, list(commands), n=1, cutoff=0.6) if commands else []
    if synonym in commands:
        hints.insert(0, t("你是不是想用子命令 {name}?", name=synonym))
    elif close:
        hints.insert(0, t("你是不是想用子命令 {name}?", name=close[0]))
    if not commands:
        message = t("多余的参数 {word}:{prog} 不接受位置参数", word=word)
    else:
        message = t("未知的子命令或多余的参数 {word}(可用子命令:{names})", word=word, names=", ".join(sorted(commands)))
    return UsageError(message, word=word, hints=hints)


def parse_args(argv: Sequence[str], commands: Mapping[str, Command]) -> Invocation:
    """Parse a command line strictly; raises `UsageError` for anything it cannot run.

    `commands`: the subcommands the first positional word may select (`registry.COMMANDS`).

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
            if command is None and not positionals and word in commands:
                command = commands[word]
                options = {**_BY_NAME, **{n: o for o in command.extra_options for n in o.names}}
                continue
            if command is not None and command.accepts_args:
                positionals.append(word)
                continue
            raise _stray(word, command, commands)
        if word == "--":
            only_positionals = True
            continue
        name, has_inline, inline = word.partition("=")
        opt = options.get(name)
        if opt is None:
            hints = []
            guess = suggest_option(word, command.extra_options if command is not None else ())
            if guess is not None:
                hints.append(t("你是不是想写 {guess}?", guess=guess))
            if command is not None:
                hints.append(t("{command} 的参数见 {prog} {command} --help", command=command.name))
            raise UsageError(t("未知参数 {word}", word=word), word=word, hints=hints)
        if opt.dest in seen:
            raise UsageError(
                t("参数 {name} 重复出现(之前已给过 {before})", name=name, before=seen[opt.dest]),
                word=name,
                hints=[t("{names} 只能给一次", names=" / ".join(opt.names))],
            )
        seen[opt.dest] = name
        if not opt.takes_value:
            if has_inline:
                raise UsageError(
                    t("参数 {name} 不接受值:{word}", name=name, word=word),
                    word=word,
                    hints=[t("只写 {name}", name=name)],
                )
            values[opt.dest] = True
            continue
        form = t("{name} <{what}> 或 {name}=<{what}>", name=name, what=_metavar_zh(opt))
        if has_inline:
            value = inline
        elif i >= len(argv):
            raise UsageError(t("参数 {name} 缺少值", name=name), word=name, hints=[t("应写成 {form}", form=form)])
        else:
            value = argv[i]
            if value.startswith("-"):
                raise UsageError(
                    t(
                        "参数 {name} 缺少值:后面紧跟的 {value} 是另一个参数,不会被当成{what}",
                        name=name,
                        value=value,
                        what=_metavar_zh(opt),
                    ),
                    word=name,
                    hints=[
                        t(
                            "应写成 {form}(名字真以 - 开头时用 {name}=<{what}>)",
                            form=form,
                            name=name,
                            what=_metavar_zh(opt),
                        )
                    ],
                )
            i += 1
        if not value.strip():
            raise UsageError(t("参数 {name} 的值为空", name=name), word=name, hints=[t("应写成 {form}", form=form)])
        char = control_char(value) if opt.metavar in ("DIR", "URL") else None
        if char is not None:
            raise UsageError(
                t("参数 {name} 的值含控制字符 {char},不能用作目录或地址", name=name, char=char),
                word=name,
                hints=[t("目录和地址里不能有换行、制表符这类控制字符")],
            )
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
        no_relay=values.get("no_relay") is True,
        args=tuple(positionals),
        options={dest: value for dest, value in values.items() if dest in extra},
    )


def _metavar_zh(opt: Option) -> str:
    return t(_METAVARS_ZH.get(opt.metavar, opt.metavar or N_("值")))


_METAVARS_ZH = {
    "HOST": N_("地址"),
    "DIR": N_("目录"),
    "N": N_("数字"),
    "SCOPE": N_("作用域"),
    "KIND": N_("类型"),
    "ID": "id",
    "TEXT": N_("文本"),
    "URL": N_("地址"),
    "TAGS": N_("标签"),
    "X": N_("数字"),
}


# --------------------------------------------------------------------------------------------
# Help and version (no SDK, no disk)
# --------------------------------------------------------------------------------------------


def help_text(commands: Mapping[str, Command]) -> str:
    """The `--help` text; its first line is `dsh-memory-mcp X.Y.Z — …`."""
    env = "\n".join(config.env_help_lines("en" if english() else "zh"))  # the table, never listed by hand
    return t(HELP_ZH, tagline=t(TAGLINE), commands=_command_list(commands), env=env, log_file=log_file_hint())


def _command_list(commands: Mapping[str, Command]) -> str:
    width = max((len(name) for name in commands), default=0)
    return "\n".join(f"  {name.ljust(width)}  {t(cmd.summary)}" for name, cmd in commands.items())


def command_help_text(command: Command) -> str:
    """``<command> --help``: synopsis, what it does, its options, the shared ones."""
    lines = [f"{PROG} {command.name} — {t(command.summary)}", "", t("用法:")]
    for form in command.usage or (command.name,):
        lines.append(f"  {PROG} {t(form)} [--store-dir DIR] [--project DIR]")
    if command.details:
        parts = (command.details,) if isinstance(command.details, str) else command.details
        lines += ["", "".join(t(part) for part in parts).rstrip("\n")]
    rows = [(", ".join(o.names) + (f" {o.metavar}" if o.takes_value else ""), t(o.help)) for o in command.extra_options]
    rows += [
        ("--store-dir DIR, --store DIR", t("记忆存储目录(缺省 $DSH_MEMORY_STORE_DIR → ~/.dsh-memory-store)")),
        ("--project DIR, --project-dir DIR", t("当前工作区,决定 project 作用域(缺省 $DSH_MEMORY_PROJECT → 当前目录)")),
        ("-h, --help", t("打印本帮助后退出(0)")),
    ]
    width = max(len(left) for left in (r[0] for r in rows))
    lines += ["", t("参数:")] + [f"  {left.ljust(width)}  {right}" for left, right in rows]
    return "\n".join(lines) + "\n"


def version_text() -> str:
    return f"{PROG} {__version__}\n"
