"""`serve` as a login service: a systemd user unit (Linux), a launchd agent (macOS) or a Task Scheduler
task (Windows), its file and the commands that load and unload it. `spec` is pure, so each OS's file
can be checked anywhere; `setup --serve` writes it. No token here: serve keeps its own (`serve_token`).
"""

from __future__ import annotations

import os
import plistlib
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from dsh_memory_mcp.cli.hosts import home_dir
from dsh_memory_mcp.cli.messages import t
from dsh_memory_mcp.cli.parser import control_char

UNIT_NAME = "dsh-memory-mcp.service"
LABEL = "dev.dsh.memory-mcp"
TASK_NAME = "dsh-memory-mcp"


@dataclass(frozen=True)
class ServiceSpec:
    """One OS's login service for serve: the file, and the commands to load and unload it."""

    kind: str
    path: str
    content: bytes
    #: Commands run after writing the file (a program name starting with ``-`` may fail: ``launchctl
    #: bootout`` of an agent that is not loaded).
    install: tuple[tuple[str, ...], ...]
    remove: tuple[tuple[str, ...], ...]
    #: Where serve's stderr (start-up lines, the web login URL) ends up.
    logs: str


def systemd_quote(word: str) -> str:
    """One argument of ``ExecStart=`` as systemd reads it: quoted when it must be, ``%`` → ``%%``,
    ``$`` → ``$$`` (no specifier or variable expansion of a path)."""
    text = word.replace("%", "%%").replace("$", "$$")
    if text and not any(c.isspace() or c in "\"'\\;" for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unit(argv: Sequence[str], env_file: str) -> str:
    exec_start = " ".join(systemd_quote(w) for w in argv)
    return (
        "[Unit]\n"
        "Description=dsh-memory-mcp serve (one shared long-term memory for every MCP host)\n"
        "After=default.target\n"
        "# another serve already owns the store, or the port is taken: give up instead of looping\n"
        "StartLimitIntervalSec=60\n"
        "StartLimitBurst=5\n"
        "\n"
        "[Service]\n"
        "Type=simple\n"
        f"ExecStart={exec_start}\n"
        "# Optional: DSH_MEMORY_TOKEN=…, DSH_MEMORY_EMBED_MODEL=… (one per line, file 0600)\n"
        f"EnvironmentFile=-{systemd_quote(env_file)}\n"
        "Restart=on-failure\n"
        "RestartSec=2\n"
        "KillSignal=SIGTERM\n"
        "TimeoutStopSec=20\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def _plist(argv: Sequence[str], log: str) -> bytes:
    agent = {
        "Label": LABEL,
        "ProgramArguments": list(argv),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ProcessType": "Background",
        "StandardErrorPath": log,
        "StandardOutPath": log,
    }
    return plistlib.dumps(agent, fmt=plistlib.FMT_XML)


def _task_xml(argv: Sequence[str]) -> bytes:
    command = escape(argv[0])
    arguments = escape(subprocess.list2cmdline(list(argv[1:])))
    text = (
        '<?xml version="1.0" encoding="UTF-16"?>\n'
        '<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">\n'
        "  <RegistrationInfo><Description>dsh-memory-mcp serve (one shared long-term memory for every MCP host)"
        "</Description></RegistrationInfo>\n"
        "  <Triggers><LogonTrigger><Enabled>true</Enabled></LogonTrigger></Triggers>\n"
        '  <Principals><Principal id="Author"><LogonType>InteractiveToken</LogonType>'
        "<RunLevel>LeastPrivilege</RunLevel></Principal></Principals>\n"
        "  <Settings>\n"
        "    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>\n"
        "    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>\n"
        "    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>\n"
        "    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>\n"
        "    <RestartOnFailure><Interval>PT1M</Interval><Count>3</Count></RestartOnFailure>\n"
        "    <Enabled>true</Enabled>\n"
        "  </Settings>\n"
        '  <Actions Context="Author"><Exec>'
        f"<Command>{command}</Command><Arguments>{arguments}</Arguments>"
        "</Exec></Actions>\n"
        "</Task>\n"
    )
    return text.encode("utf-16")  # schtasks reads the XML as UTF-16 (with its BOM)


def spec(platform: str, env: Mapping[str, str], argv: Sequence[str], *, uid: int | None = None) -> ServiceSpec:
    """The login service running `argv` (serve's full command line) on `platform`. ValueError when
    a word or path holds a control character: none of these files can carry one safely."""
    home = home_dir(env, platform)
    for word in (*argv, home, env.get("XDG_CONFIG_HOME") or "", env.get("LOCALAPPDATA") or ""):
        char = control_char(word)
        if char is not None:
            raise ValueError(t("{what} 含控制字符 {char}", what=ascii(word), char=char))
    if platform == "darwin":
        path = os.path.join(home, "Library", "LaunchAgents", f"{LABEL}.plist")
        log = os.path.join(home, "Library", "Logs", "dsh-memory-mcp-serve.log")
        domain = f"gui/{uid if uid is not None else os.getuid()}"
        return ServiceSpec(
            "launchd",
            path,
            _plist(argv, log),
            install=(("-launchctl", "bootout", domain, path), ("launchctl", "bootstrap", domain, path)),
            remove=(("launchctl", "bootout", domain, path),),
            logs=log,
        )
    if platform == "win32":
        base = env.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
        path = os.path.join(base, "dsh-memory-mcp", "serve-task.xml")
        return ServiceSpec(
            "schtasks",
            path,
            _task_xml(argv),
            install=(
                ("schtasks", "/Create", "/TN", TASK_NAME, "/XML", path, "/F"),
                ("schtasks", "/Run", "/TN", TASK_NAME),
            ),
            remove=(("-schtasks", "/End", "/TN", TASK_NAME), ("schtasks", "/Delete", "/TN", TASK_NAME, "/F")),
            logs="%LOCALAPPDATA%\\dsh-memory-mcp\\Logs",
        )
    config_home = env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    path = os.path.join(config_home, "systemd", "user", UNIT_NAME)
    env_file = os.path.join(config_home, "dsh-memory-mcp", "serve.env")
    return ServiceSpec(
        "systemd",
        path,
        _unit(argv, env_file).encode("utf-8"),
        install=(("systemctl", "--user", "daemon-reload"), ("systemctl", "--user", "enable", "--now", UNIT_NAME)),
        remove=(("systemctl", "--user", "disable", "--now", UNIT_NAME), ("systemctl", "--user", "daemon-reload")),
        logs=f"journalctl --user -u {UNIT_NAME}",
    )
