"""`setup` against hostile input: control characters in the paths and URLs it would write into a
systemd unit, launchd plist, Task Scheduler XML or host config, and host configs nested deeper
than the interpreter's recursion limit.

Real `python -m dsh_memory_mcp setup` processes under a scratch HOME (PATH without `systemctl`, so
nothing outside the scratch directory is touched); the plist and XML writers, which only run on
their own OS, are checked through `service.spec` directly.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dsh_memory_mcp.cli import service
from dsh_memory_mcp.cli.main import parse_args
from dsh_memory_mcp.cli.parser import UsageError
from tests.conftest import PYTHON, subprocess_env

INJECTED = "x\nExecStart=/bin/sh -c 'touch /tmp/dsh-pwned'"
#: A newline, a carriage return, a tab, DEL, a C1 control (NEL) and the Unicode line separator.
CONTROLS = ["\n", "\r", "\t", "\x7f", "\x85", "\u2028"]


def scratch(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "bin").mkdir(exist_ok=True)
    env = subprocess_env(
        HOME=str(tmp_path / "home"),
        USERPROFILE=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "home" / ".config"),
        APPDATA=str(tmp_path / "home" / "appdata"),
        PATH=str(tmp_path / "bin"),  # no systemctl: nothing is loaded into the real user session
        **{"LANG": "zh_CN.UTF-8", **extra},
    )
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "DSH_MEMORY_STORE_DIR", "LC_ALL", "LC_MESSAGES"):
        if name not in extra:
            env.pop(name, None)
    return env


def setup(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "setup", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
    )


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- control characters ---------------------------------------------------------------------------


@pytest.mark.parametrize("char", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
def test_setup_serve_refuses_a_control_character_in_store_dir_and_writes_no_unit(tmp_path, char):
    # a6e4495 wrote "ExecStart=/bin/sh …" as a second line of the unit (exit 0 with systemctl there).
    env = scratch(tmp_path)
    result = setup(env, "--serve", "--store-dir", INJECTED.replace("\n", char))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--store-dir" in result.stderr and "控制字符" in result.stderr
    assert files(tmp_path / "home") == {}  # no unit, no directory for it


def test_setup_serve_refuses_a_store_dir_from_the_environment_with_a_newline(tmp_path):
    env = scratch(tmp_path, DSH_MEMORY_STORE_DIR=INJECTED)
    result = setup(env, "--serve")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "DSH_MEMORY_STORE_DIR" in result.stderr and "U+000A" in result.stderr
    assert files(tmp_path / "home") == {}


def test_setup_serve_refuses_a_store_taken_from_another_hosts_config_with_a_newline(tmp_path):
    env = scratch(tmp_path)
    cursor = tmp_path / "home" / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    entry = {"command": PYTHON, "args": ["-m", "dsh_memory_mcp", "--store-dir", "/srv/" + INJECTED]}
    cursor.write_text(json.dumps({"mcpServers": {"dsh-memory": entry}}), encoding="utf-8")
    before = files(tmp_path / "home")
    result = setup(env, "--serve")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "存储目录" in result.stderr and "控制字符 U+000A" in result.stderr
    assert files(tmp_path / "home") == before


@pytest.mark.parametrize("host", ["cursor", "codex"])
@pytest.mark.parametrize("char", ["\n", "\u2029"], ids=["newline", "U+2029"])
def test_setup_of_a_host_config_refuses_a_control_character_in_store_dir(tmp_path, host, char):
    # JSON and TOML writers escape the character; the store path it names would still be broken.
    env = scratch(tmp_path)
    path = tmp_path / "home" / (".cursor/mcp.json" if host == "cursor" else ".codex/config.toml")
    path.parent.mkdir(parents=True)
    path.write_text("{}\n" if host == "cursor" else 'model = "o3"\n', encoding="utf-8")
    before = files(tmp_path / "home")
    result = setup(env, host, "--store-dir", "/srv/store" + char + "evil")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--store-dir" in result.stderr and "控制字符" in result.stderr
    assert files(tmp_path / "home") == before  # the config untouched, no backup


def test_setup_url_with_a_newline_is_refused_in_english_too(tmp_path):
    env = scratch(tmp_path, LANG="en_US.UTF-8")
    result = setup(env, "cursor", "--url", "http://127.0.0.1:8765/mcp\nX-Evil: 1")
    assert result.returncode == 2
    assert "--url holds a control character (U+000A)" in result.stderr
    assert files(tmp_path / "home") == {}


@pytest.mark.parametrize("option", ["--store-dir", "--project", "--path"])
def test_the_parser_refuses_a_control_character_in_a_directory_option(option):
    words = ["list", option, "/srv/a\x1bb"] if option == "--path" else [option, "/srv/a\x1bb"]
    with pytest.raises(UsageError) as caught:
        parse_args(words)
    assert option in caught.value.message and "U+001B" in caught.value.message
    parse_args(["list", option, "/srv/普通 目录"] if option == "--path" else [option, "/srv/普通 目录"])


ARGV = ["/opt/dsh/bin/dsh-memory-mcp", "serve", "--store-dir", "/home/me/store"]


@pytest.mark.parametrize("platform", ["linux", "darwin", "win32"])
@pytest.mark.parametrize("where", ["argv", "home"])
def test_every_service_file_writer_refuses_a_control_character(platform, where):
    # The systemd unit, the launchd plist and the Task Scheduler XML: a6e4495 wrote each.
    env = {"HOME": "/home/me", "USERPROFILE": "C:\\Users\\me", "LOCALAPPDATA": "C:\\Users\\me\\AppData\\Local"}
    argv = list(ARGV)
    if where == "argv":
        argv[-1] = "/home/me/store\n<key>Program</key><string>/bin/sh</string>"
    else:
        env = {k: v + "\r\n" for k, v in env.items()}
    with pytest.raises(ValueError, match="控制字符"):
        service.spec(platform, env, argv, uid=1000)
    assert service.spec(platform, {"HOME": "/home/me"}, ARGV, uid=1000).content  # clean input still works


# -- hostile nesting ------------------------------------------------------------------------------


def test_a_deeply_nested_codex_toml_refuses_that_host_and_the_others_are_written(tmp_path):
    # a6e4495: "setup 失败:意外错误 RecursionError", no host written.
    env = scratch(tmp_path)
    home = tmp_path / "home"
    codex = home / ".codex" / "config.toml"
    codex.parent.mkdir(parents=True)
    codex.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    deep_json = home / ".claude.json"
    deep_json.write_text('{"mcpServers": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}", encoding="utf-8")
    cursor = home / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    cursor.write_text("{}\n", encoding="utf-8")
    untouched = {p: p.read_bytes() for p in (codex, deep_json)}
    result = setup(env, "--store-dir", str(tmp_path / "store"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "RecursionError" not in result.stdout + result.stderr
    assert f"❌ Codex:{codex} 不是合法的 TOML:嵌套太深,没有改动" in result.stdout
    assert f"{deep_json} 解析不了(第 1 行:嵌套太深),没有改动" in result.stdout
    assert "dsh-memory" in json.loads(cursor.read_text(encoding="utf-8"))["mcpServers"]
    assert {p: p.read_bytes() for p in untouched} == untouched
    assert not list(codex.parent.glob("*.bak")) and not list(home.glob(".claude.json.*.bak"))
    # Choosing the store reads every host's config: the deep one must not stop a named host either.
    again = setup(env, "cursor", "--remove")
    assert again.returncode == 0, again.stdout + again.stderr
    named = setup(env, "cursor")
    assert named.returncode == 0 and "RecursionError" not in named.stdout + named.stderr, named.stderr
