"""What we know about each MCP host: where its user-level config lives per OS (`candidates`), its
format, the key our entry goes under, and the shape of a stdio and a URL entry. Used by `setup`
(writes) and `doctor` (reads). Pure lookups on an environment mapping and a platform string; nothing
touches the disk except `found`, `read_config` and `configured`, which only look.

Sources for the less obvious shapes: docs.windsurf.com/windsurf/cascade/mcp (``serverUrl``),
docs.cline.bot/cli/configuration, geminicli.com/docs/tools/mcp-server (``httpUrl``),
docs.github.com/en/copilot/how-tos/copilot-cli/customize-copilot/add-mcp-servers (``type``, ``tools``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dsh_memory_mcp.cli import confedit, hostwrite
from dsh_memory_mcp.cli.confedit import ConfigSyntaxError
from dsh_memory_mcp.cli.messages import N_, t

#: The key our entry has in every host's server table.
SERVER_NAME = "dsh-memory"
#: ZCode drops a whole server entry that has one key outside this set (its schema is strict).
ZCODE_KEYS = frozenset(
    {"type", "command", "args", "cwd", "env", "enabled", "timeoutMs", "alwaysLoad", "protocolVersion"}
)
ZCODE_TIMEOUT_MS = 60000

Format = Literal["json", "toml"]


@dataclass(frozen=True)
class Host:
    """One MCP host. `table` is the path of the object (TOML: table) holding the servers."""

    id: str
    name: str
    format: Format
    table: tuple[str, ...]
    #: Does its config file take a URL entry with headers (a running `serve`)? Others get the stdio
    #: command, which relays to `serve` by itself when `<store>/serve.json` names one.
    url_form: bool
    restart: str
    aliases: tuple[str, ...] = ()


HOSTS: tuple[Host, ...] = (
    Host(
        "claude-code",
        "Claude Code",
        "json",
        ("mcpServers",),
        True,
        N_("新开一个 claude 会话(/mcp 可查看)"),
        ("claude",),
    ),
    Host("claude-desktop", "Claude Desktop", "json", ("mcpServers",), False, N_("完全退出再打开 Claude"), ("desktop",)),
    Host("cursor", "Cursor", "json", ("mcpServers",), True, N_("重启 Cursor(或在 设置 → MCP 里刷新)")),
    Host("vscode", "VS Code", "json", ("servers",), True, N_("执行 Developer: Reload Window"), ("code", "vs-code")),
    Host("codex", "Codex", "toml", ("mcp_servers",), True, N_("新开一个 codex 会话")),
    Host("trae", "Trae", "json", ("mcpServers",), False, N_("重启 Trae"), ("trae-cn",)),
    Host("workbuddy", "WorkBuddy", "json", ("mcpServers",), False, N_("重启 WorkBuddy")),
    Host("zcode", "ZCode", "json", ("mcp", "servers"), False, N_("重启 ZCode")),
    Host("windsurf", "Windsurf", "json", ("mcpServers",), True, N_("在 Windsurf 的 MCP 面板里刷新(或重启 Windsurf)")),
    Host(
        "cline", "Cline", "json", ("mcpServers",), False, N_("在 Cline 的 MCP Servers 面板里重启服务器(或重启编辑器)")
    ),
    Host(
        "gemini", "Gemini CLI", "json", ("mcpServers",), True, N_("新开一个 gemini 会话(/mcp 可查看)"), ("gemini-cli",)
    ),
    Host(
        "copilot",
        "Copilot CLI",
        "json",
        ("mcpServers",),
        True,
        N_("新开一个 copilot 会话(/mcp show 可查看)"),
        ("copilot-cli",),
    ),
)


def by_name(word: str) -> Host | None:
    """The host `word` names (id or alias, any case, `_`/space for `-`), or None."""
    key = word.strip().lower().replace("_", "-").replace(" ", "-")
    return next((h for h in HOSTS if key == h.id or key in h.aliases or key == h.id.replace("-", "")), None)


# --------------------------------------------------------------------------------------------
# Paths
# --------------------------------------------------------------------------------------------


def home_dir(env: Mapping[str, str], platform: str) -> str:
    found = (env.get("USERPROFILE") or env.get("HOME")) if platform == "win32" else env.get("HOME")
    return found or os.path.expanduser("~")


def normal_path(path: str) -> str:
    """`path` as entries are compared and stores keyed: absolute, ``~`` expanded, case folded where the OS folds it."""
    return os.path.normcase(os.path.normpath(os.path.abspath(os.path.expanduser(path))))


def _join(platform: str, *parts: str) -> str:
    sep = "\\" if platform == "win32" else "/"
    out = parts[0].rstrip("/\\") if len(parts[0]) > 1 else parts[0]
    for part in parts[1:]:
        out = out + ("" if out.endswith(("/", "\\")) else sep) + part
    return out


def _app_dir(env: Mapping[str, str], platform: str) -> str:
    """Where desktop apps (Electron: Claude, VS Code, Trae) keep their user data on this OS."""
    home = home_dir(env, platform)
    if platform == "win32":
        return env.get("APPDATA") or _join(platform, home, "AppData", "Roaming")
    if platform == "darwin":
        return _join(platform, home, "Library", "Application Support")
    return env.get("XDG_CONFIG_HOME") or _join(platform, home, ".config")


#: Where each other host keeps its user config: its directories (first found preferred; ``~`` the
#: home directory, ``@`` `_app_dir`), the file in them, the environment variables that move the
#: directory and the file.
_PLACES: dict[str, tuple[tuple[str, ...], str, str, str]] = {
    "claude-desktop": (("@/Claude",), "claude_desktop_config.json", "", ""),
    "cursor": (("~/.cursor",), "mcp.json", "", ""),
    "vscode": (("@/Code/User",), "mcp.json", "", ""),
    "codex": (("~/.codex",), "config.toml", "CODEX_HOME", ""),
    "trae": (("@/Trae CN/User", "@/Trae/User"), "mcp.json", "", ""),
    "workbuddy": (("~/.workbuddy",), "mcp.json", "", ""),
    "zcode": (("~/.zcode",), "cli/config.json", "", ""),
    "windsurf": (("~/.codeium/windsurf",), "mcp_config.json", "", ""),
    "cline": (("~/.cline",), "data/settings/cline_mcp_settings.json", "", "CLINE_MCP_SETTINGS_PATH"),
    "gemini": (("~/.gemini",), "settings.json", "", ""),
    "copilot": (("~/.copilot",), "mcp-config.json", "COPILOT_HOME", ""),
}


def candidates(host: Host, env: Mapping[str, str], platform: str) -> list[tuple[str, str]]:
    """`(config file, marker)` pairs, preferred first: the host counts as installed when the
    marker (a directory, or the file itself) exists."""
    home = home_dir(env, platform)
    if host.id == "claude-code":  # the file lives beside its directory, not in it
        base = env.get("CLAUDE_CONFIG_DIR")
        if base:
            return [(_join(platform, base, ".claude.json"), base)]
        path = _join(platform, home, ".claude.json")
        return [(path, _join(platform, home, ".claude")), (path, path)]
    dirs, file, dir_env, file_env = _PLACES[host.id]
    out = []
    for where in dirs:
        root, *parts = where.split("/")
        base = (dir_env and env.get(dir_env)) or _join(
            platform, home if root == "~" else _app_dir(env, platform), *parts
        )
        out.append(((file_env and env.get(file_env)) or _join(platform, base, *file.split("/")), base))
    return out


def found(host: Host, env: Mapping[str, str], platform: str) -> list[str]:
    """The config files of this host's installations on this machine (deduplicated), preferred first."""
    out: list[str] = []
    for path, marker in candidates(host, env, platform):
        if (os.path.exists(path) or os.path.exists(marker)) and path not in out:
            out.append(path)
    return out


# --------------------------------------------------------------------------------------------
# Entries
# --------------------------------------------------------------------------------------------


def stdio_entry(host: Host, command: str, args: Sequence[str]) -> dict[str, Any]:
    """Our entry in `host`'s own stdio shape."""
    if host.id in ("claude-code", "vscode"):
        return {"type": "stdio", "command": command, "args": list(args)}
    if host.id == "zcode":
        return {"type": "stdio", "command": command, "args": list(args), "timeoutMs": ZCODE_TIMEOUT_MS}
    if host.id == "copilot":
        return {"type": "local", "command": command, "args": list(args), "tools": ["*"]}
    return {"command": command, "args": list(args)}


def url_entry(host: Host, url: str, token: str | None) -> dict[str, Any] | None:
    """Our entry in `host`'s URL shape (Streamable HTTP + bearer header), None if it has none."""
    if not host.url_form:
        return None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if host.id == "codex":
        return {"url": url, **({"http_headers": headers} if headers else {})}
    entry: dict[str, Any] = {"type": "http"} if host.id in ("claude-code", "vscode", "copilot") else {}
    entry[{"windsurf": "serverUrl", "gemini": "httpUrl"}.get(host.id, "url")] = url
    if headers:
        entry["headers"] = headers
    if host.id == "copilot":
        entry["tools"] = ["*"]
    return entry


#: Keys that belong to the stdio or the URL form: replaced wholesale when we write ours; any other
#: key the user added to our entry (env, timeouts, disabled…) is kept.
MANAGED_KEYS = frozenset(
    {"type", "command", "args", "url", "headers", "http_headers", "serverUrl", "httpUrl", "transport"}
)


def merged(host: Host, old: Any, ours: Mapping[str, Any]) -> dict[str, Any]:
    """Our entry plus what the user added to the old one (for ZCode only keys its schema knows)."""
    keep = {}
    if isinstance(old, Mapping):
        keep = {k: v for k, v in old.items() if k not in MANAGED_KEYS and k not in ours}
        if host.id == "zcode":
            keep = {k: v for k, v in keep.items() if k in ZCODE_KEYS}
    return {**ours, **keep}


@dataclass(frozen=True)
class Configured:
    """An entry of ours found in a host's config file."""

    host: Host
    path: str
    name: str
    command: str | None
    url: str | None
    store: str | None
    #: The HTTP headers a URL entry sends (``headers`` / Codex's ``http_headers``; Codex's
    #: ``bearer_token_env_var`` resolved from the environment when set).
    headers: tuple[tuple[str, str], ...] = ()


def _looks_like_ours(name: str, entry: Mapping[str, Any]) -> bool:
    if name == SERVER_NAME:
        return True
    words = [entry.get("command"), *(entry.get("args") or [])]
    return any(isinstance(w, str) and ("dsh-memory-mcp" in w or "dsh_memory_mcp" in w) for w in words)


def entry_store(entry: Mapping[str, Any]) -> str | None:
    """The store an entry's command line selects (`--store-dir`/`--store`, else its env), or None."""
    args = [a for a in entry.get("args") or [] if isinstance(a, str)]
    for i, arg in enumerate(args):
        for flag in ("--store-dir", "--store"):
            if arg == flag and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(flag + "="):
                return arg[len(flag) + 1 :]
    env = entry.get("env")
    if isinstance(env, Mapping) and isinstance(env.get("DSH_MEMORY_STORE_DIR"), str):
        return str(env["DSH_MEMORY_STORE_DIR"])
    return None


def load(host: Host, text: str) -> Any:
    """A config file's document (`{}` when empty); raises `confedit.ConfigSyntaxError` / ValueError
    (TOML that is invalid or nests deeper than the interpreter's recursion limit included)."""
    if host.format == "json":
        return confedit.parse_json(text)
    import tomllib

    try:
        return tomllib.loads(text) if text.strip() else {}
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(t("不是合法的 TOML:{error}", error=exc)) from exc
    except RecursionError as exc:
        raise ValueError(t("不是合法的 TOML:{error}", error=t("嵌套太深"))) from exc


def servers(host: Host, document: Any) -> Mapping[str, Any]:
    """The object holding the host's servers (`Host.table`), empty when there is none."""
    node = document
    for key in host.table:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def read_entries(host: Host, path: str, text: str, env: Mapping[str, str]) -> list[Configured]:
    """Our entries in one config file's text (raises `confedit.ConfigSyntaxError` / ValueError)."""
    out = []
    for name, entry in servers(host, load(host, text)).items():
        if not isinstance(entry, Mapping) or not _looks_like_ours(name, entry):
            continue
        command = entry.get("command")
        url = entry.get("url") or entry.get("serverUrl") or entry.get("httpUrl")
        raw_headers = entry.get("headers") or entry.get("http_headers") or {}
        headers = (
            tuple((str(k), str(v)) for k, v in raw_headers.items() if isinstance(v, str))
            if isinstance(raw_headers, Mapping)
            else ()
        )
        env_var = entry.get("bearer_token_env_var")
        if isinstance(env_var, str) and env.get(env_var):
            headers = (*headers, ("Authorization", f"Bearer {env[env_var]}"))
        out.append(
            Configured(
                host=host,
                path=path,
                name=name,
                command=command if isinstance(command, str) else None,
                url=url if isinstance(url, str) else None,
                store=entry_store(entry),
                headers=headers,
            )
        )
    return out


def executable_problem(command: str | None, env: Mapping[str, str]) -> str | None:
    """Why a host could not start `command`, or None when it can (absolute path exists, or on PATH)."""
    if not command:
        return t("条目里没有 command")
    if os.path.isabs(command) or os.sep in command or (os.altsep and os.altsep in command):
        if not os.path.isfile(command):
            return t("{command} 不存在", command=command)
        if not os.access(command, os.X_OK):
            return t("{command} 不可执行", command=command)
        return None
    if shutil.which(command, path=env.get("PATH")) is None:
        return t(
            "{command} 不在 PATH 上(IDE 拉起进程时的 PATH 往往更短,最好写绝对路径:{prog} setup 会写)", command=command
        )
    return None


def read_config(path: str) -> tuple[str, bool] | None:
    """(text, had a BOM) of a config file, None when it does not exist; ValueError if it is not UTF-8,
    not a regular file or too large (`hostwrite.read_snapshot`)."""
    snapshot = hostwrite.read_snapshot(path)
    return decode_config(snapshot.data) if snapshot is not None else None


def decode_config(raw: bytes) -> tuple[str, bool]:
    """(text, had a BOM) of a config file's bytes; ValueError if not UTF-8."""
    bom = raw.startswith(b"\xef\xbb\xbf")
    try:
        return raw[3 if bom else 0 :].decode("utf-8"), bom
    except UnicodeDecodeError as exc:
        raise ValueError(t("不是 UTF-8 文本")) from exc


def configured(env: Mapping[str, str], platform: str) -> tuple[list[Configured], list[tuple[Host, str, str]]]:
    """Every entry of ours in the installed hosts' config files, and the files that did not parse."""
    entries: list[Configured] = []
    broken: list[tuple[Host, str, str]] = []
    for host in HOSTS:
        for path in found(host, env, platform):
            try:
                text = read_config(path)
                if text is None:
                    continue
                entries.extend(read_entries(host, path, text[0], env))
            except (OSError, ValueError) as exc:
                broken.append((host, path, describe_problem(exc)))
    return entries, broken


def describe_problem(exc: BaseException) -> str:
    if isinstance(exc, ConfigSyntaxError):
        return t("解析不了({error})", error=exc)
    if isinstance(exc, OSError):
        return t("读不了({why})", why=exc.strerror or exc)
    return str(exc)


# --------------------------------------------------------------------------------------------
# Hooks: hosts that run a command at session start / on each prompt and add its output to the
# model's context (`dsh-memory-mcp hook`). Sources: code.claude.com/docs/en/hooks,
# geminicli.com/docs/hooks/reference, cursor.com/docs/agent/hooks (Cursor's ``beforeSubmitPrompt``
# cannot add context, so only its session start).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HookFile:
    """Where one host keeps its hooks, and which of its events run which `hook` event."""

    host: str
    #: (the host's event name, our `hook` event)
    events: tuple[tuple[str, str], ...]
    #: Top-level members the file must have (Cursor's ``version``).
    header: tuple[tuple[str, Any], ...] = ()


HOOK_FILES: tuple[HookFile, ...] = (
    HookFile("claude-code", (("SessionStart", "session-start"), ("UserPromptSubmit", "prompt"))),
    HookFile("gemini", (("SessionStart", "session-start"), ("BeforeAgent", "prompt"))),
    HookFile("cursor", (("sessionStart", "session-start"),), (("version", 1),)),
)
#: Seconds a host waits for our hook (it answers in well under one; a stalled store must not hold a prompt).
HOOK_TIMEOUT_SECS = 10


def hook_file(host: Host) -> HookFile | None:
    return next((h for h in HOOK_FILES if h.host == host.id), None)


def hook_path(host: Host, env: Mapping[str, str], platform: str) -> str:
    """The file holding `host`'s user-level hooks."""
    home = home_dir(env, platform)
    if host.id == "claude-code":
        return _join(platform, env.get("CLAUDE_CONFIG_DIR") or _join(platform, home, ".claude"), "settings.json")
    if host.id == "cursor":
        return _join(platform, home, ".cursor", "hooks.json")
    return candidates(host, env, platform)[0][0]


def hook_entry(host: Host, command: str) -> dict[str, Any]:
    """One element of the host's hook list for event `command` (a shell command line)."""
    if host.id == "cursor":
        return {"command": command}
    run: dict[str, Any] = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECS}
    if host.id == "gemini":
        run = {"name": SERVER_NAME, **run, "timeout": HOOK_TIMEOUT_SECS * 1000}
    return {"hooks": [run]}


def is_our_hook(element: Any) -> bool:
    """Whether a hook list element runs our hook (``-m dsh_memory_mcp.cli.hook`` or ``dsh-memory-mcp …
    hook``), whatever its path or store."""
    if isinstance(element, Mapping):
        return any(is_our_hook(v) for v in element.values())
    if isinstance(element, list):
        return any(is_our_hook(v) for v in element)
    if not isinstance(element, str):
        return False
    return "dsh_memory_mcp.cli.hook " in element or (
        ("dsh-memory-mcp" in element or "dsh_memory_mcp" in element) and " hook " in element
    )
