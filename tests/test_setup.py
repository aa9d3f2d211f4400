"""`dsh-memory-mcp setup`: every host's config file in a fake home, through the real CLI.

Each test runs `python -m dsh_memory_mcp setup …` as a subprocess with HOME, USERPROFILE, APPDATA
and XDG_CONFIG_HOME pointing into the test's temp dir, so the host paths it finds are the fake
ones. Expected paths and entries are written out here by hand, never computed by the code under
test; "it starts the server" spawns exactly the command and args the written file holds and
shakes hands over raw JSON-RPC.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PYTHON, subprocess_env

RUN_TIMEOUT = 60
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05",'
    b'"capabilities":{},"clientInfo":{"name":"test-setup","version":"1"}}}\n'
)

# Each host's config file (relative to the fake home, or to XDG_CONFIG_HOME as "XDG/…") and a
# realistic existing file: other servers, other keys, the host's own layout.
SEEDS: dict[str, tuple[str, str]] = {
    "claude-code": (
        ".claude.json",
        '{\n  "numStartups": 12,\n  "mcpServers": {\n    "github": {\n      "type": "stdio",\n'
        '      "command": "npx",\n      "args": ["-y", "@modelcontextprotocol/server-github"],\n'
        '      "env": {}\n    }\n  },\n  "projects": {\n    "/home/me/app": {"allowedTools": []}\n  }\n}\n',
    ),
    "claude-desktop": (
        "XDG/Claude/claude_desktop_config.json",
        '{\n    "mcpServers": {\n        "fs": {\n            "command": "npx",\n'
        '            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]\n        }\n    },\n'
        '    "globalShortcut": "Ctrl+Space"\n}\n',
    ),
    "cursor": (".cursor/mcp.json", '{"mcpServers":{"linear":{"url":"https://mcp.linear.app/sse"}}}'),
    "vscode": (
        "XDG/Code/User/mcp.json",
        '// VS Code MCP servers (JSONC)\n{\n\t"servers": {\n\t\t"playwright": {\n\t\t\t"command": "npx",\n'
        '\t\t\t"args": ["@playwright/mcp@latest"], // browser\n\t\t},\n\t},\n\t"inputs": [],\n}\n',
    ),
    "codex": (
        ".codex/config.toml",
        'model = "o3"\napproval_policy = "on-request"\n\n# servers\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
        'args = ["--port", "0"]\n\n[profiles.fast]\nmodel = "o4-mini"\n',
    ),
    "trae": (
        "XDG/Trae CN/User/mcp.json",
        '{\n  "mcpServers": {\n    "amap": {"command": "npx", "args": ["-y", "@amap/amap-maps-mcp-server"]}\n  }\n}\n',
    ),
    "workbuddy": (".workbuddy/mcp.json", '{\n  "mcpServers": {}\n}\n'),
    "zcode": (
        ".zcode/cli/config.json",
        '{\n  "theme": "dark",\n  "mcp": {\n    "servers": {\n      "other": {\n        "type": "stdio",\n'
        '        "command": "/usr/bin/other-mcp",\n        "enabled": true\n      }\n    }\n  }\n}\n',
    ),
    # The hosts below, each as its current documentation writes its file (see cli/hosts.py).
    "windsurf": (
        ".codeium/windsurf/mcp_config.json",
        '{\n  "mcpServers": {\n    "github": {\n      "serverUrl": "https://api.githubcopilot.com/mcp/",\n'
        '      "headers": {"Authorization": "Bearer x"}\n    }\n  }\n}\n',
    ),
    "cline": (
        ".cline/data/settings/cline_mcp_settings.json",
        '{\n  "mcpServers": {\n    "local-server": {\n      "command": "node",\n      "args": ["/path/to/server.js"],\n'
        '      "disabled": false,\n      "autoApprove": []\n    }\n  }\n}\n',
    ),
    "gemini": (
        ".gemini/settings.json",
        '{\n  "theme": "GitHub",\n  "mcpServers": {\n    "context7": {\n      "httpUrl": "https://mcp.context7.com/mcp"\n'
        "    }\n  }\n}\n",
    ),
    "copilot": (
        ".copilot/mcp-config.json",
        '{\n  "mcpServers": {\n    "playwright": {\n      "type": "stdio",\n      "command": "npx",\n'
        '      "args": ["-y", "@playwright/mcp@latest"],\n      "tools": ["*"]\n    }\n  }\n}\n',
    ),
}
# Where each host's server table is, in its parsed document.
TABLES: dict[str, tuple[str, ...]] = {
    "claude-code": ("mcpServers",),
    "claude-desktop": ("mcpServers",),
    "cursor": ("mcpServers",),
    "vscode": ("servers",),
    "codex": ("mcp_servers",),
    "trae": ("mcpServers",),
    "workbuddy": ("mcpServers",),
    "zcode": ("mcp", "servers"),
    "windsurf": ("mcpServers",),
    "cline": ("mcpServers",),
    "gemini": ("mcpServers",),
    "copilot": ("mcpServers",),
}
HOST_IDS = list(SEEDS)

# ZCode's schema for a server entry: only these keys, with these types (an unknown key makes
# ZCode drop the entry without a word).
ZCODE_SCHEMA: dict[str, type | tuple[type, ...]] = {
    "type": str,
    "command": str,
    "args": list,
    "cwd": str,
    "env": dict,
    "enabled": bool,
    "timeoutMs": int,
    "alwaysLoad": bool,
    "protocolVersion": str,
}


def check_zcode_entry(entry: Any) -> None:
    assert isinstance(entry, dict)
    unknown = set(entry) - set(ZCODE_SCHEMA)
    assert not unknown, f"ZCode would drop this entry: unknown keys {unknown}"
    for key, value in entry.items():
        assert isinstance(value, ZCODE_SCHEMA[key]), f"{key}: {value!r}"
        if ZCODE_SCHEMA[key] is int:
            assert not isinstance(value, bool) and value > 0
    assert entry["type"] == "stdio"
    assert isinstance(entry["command"], str) and entry["command"]
    assert all(isinstance(a, str) for a in entry.get("args", []))
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in entry.get("env", {}).items())


def parse_jsonc(text: str) -> Any:
    """The test's own JSONC reader for the seeds above: drop // comments and trailing commas."""
    text = re.sub(r'("(?:[^"\\]|\\.)*")|//[^\n]*', lambda m: m.group(1) or "", text)
    text = re.sub(r",(\s*[}\]])", r"\1", text)
    return json.loads(text) if text.strip() else {}


def parse(host: str, text: str) -> Any:
    if host == "codex":
        return tomllib.loads(text)
    if host == "vscode":
        return parse_jsonc(text)
    return json.loads(text)


def servers(host: str, document: Any) -> dict[str, Any]:
    node = document
    for key in TABLES[host]:
        node = node[key]
    return node


def without(host: str, document: Any, name: str = "dsh-memory") -> Any:
    copy = json.loads(json.dumps(document))
    servers(host, copy).pop(name, None)
    if host == "gemini":  # its MCP file holds its hooks too (tests/test_hooks.py checks those)
        copy.pop("hooks", None)
    return copy


@dataclass
class Home:
    root: Path
    home: Path
    xdg: Path
    appdata: Path
    store: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = subprocess_env(
            HOME=str(self.home),
            USERPROFILE=str(self.home),
            XDG_CONFIG_HOME=str(self.xdg),
            APPDATA=str(self.appdata),
            **extra,
        )
        for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME", "CLINE_MCP_SETTINGS_PATH"):
            env.pop(name, None)
        return env

    def path(self, host: str) -> Path:
        rel = SEEDS[host][0]
        return self.xdg / rel[4:] if rel.startswith("XDG/") else self.home / rel

    def seed(self, host: str, mode: int = 0o644) -> bytes:
        path = self.path(host)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = SEEDS[host][1].encode("utf-8")
        path.write_bytes(data)
        path.chmod(mode)
        return data

    def setup(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return run([PYTHON, "-m", "dsh_memory_mcp", "setup", *args], env or self.env())

    def snapshot(self) -> dict[str, bytes | None]:
        return {
            str(p.relative_to(self.root)): (p.read_bytes() if p.is_file() else None)
            for p in sorted(self.root.rglob("*"))
        }

    def backups(self, host: str) -> list[Path]:
        path = self.path(host)
        return sorted(path.parent.glob(path.name + ".dsh-memory-mcp-*.bak"))


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, encoding="utf-8", env=env, timeout=RUN_TIMEOUT)


@pytest.fixture
def fake(tmp_path: Path) -> Home:
    box = Home(tmp_path, tmp_path / "home", tmp_path / "xdg", tmp_path / "appdata", tmp_path / "the store")
    for d in (box.home, box.xdg, box.appdata):
        d.mkdir()
    return box


def expected_stdio_args(store: Path) -> list[str]:
    return ["-m", "dsh_memory_mcp", "--store-dir", str(store)]


def handshake(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Spawn `command` as a host would and send one initialize; the parsed answer."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        out, err = proc.communicate(INITIALIZE, timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode("utf-8", "replace")
    first = out.splitlines()[0]
    return json.loads(first)  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------------------
# Every host: merge, idempotence, remove, dry-run, it starts the server
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", HOST_IDS)
def test_setup_merges_our_entry_keeps_everything_else_and_remove_restores_the_bytes(fake, host):
    seed = fake.seed(host)
    result = fake.setup(host, "--store-dir", str(fake.store))
    assert result.returncode == 0, result.stdout + result.stderr
    path = fake.path(host)
    assert "✅ " in result.stdout and str(path) in result.stdout
    written = path.read_text(encoding="utf-8")
    document = parse(host, written)
    entry = servers(host, document)["dsh-memory"]
    assert entry["command"] == os.path.abspath(PYTHON)
    assert entry["args"] == expected_stdio_args(fake.store)
    assert "--project" not in json.dumps(entry)
    assert without(host, document) == without(host, parse(host, seed.decode("utf-8")))
    if host == "zcode":
        check_zcode_entry(entry)
    assert oct(path.stat().st_mode & 0o777) == "0o644"  # the file keeps its mode (no token in it)
    backups = fake.backups(host)  # Gemini CLI: one more, its hooks are written to the same file
    assert len(backups) == (2 if host == "gemini" else 1), backups
    assert seed in [b.read_bytes() for b in backups]
    assert all(oct(b.stat().st_mode & 0o777) == "0o600" for b in backups)

    again = fake.setup(host, "--store-dir", str(fake.store))
    assert again.returncode == 0 and "已是最新,未改动" in again.stdout
    assert path.read_text(encoding="utf-8") == written and len(fake.backups(host)) == len(backups)

    removed = fake.setup(host, "--remove")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert path.read_bytes() == seed


@pytest.mark.parametrize("host", HOST_IDS)
def test_dry_run_prints_the_diff_and_writes_nothing(fake, host):
    fake.seed(host)
    before = fake.snapshot()
    result = fake.setup(host, "--store-dir", str(fake.store), "--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert fake.snapshot() == before
    assert f"+++ {fake.path(host)}" in result.stdout
    assert any(line.startswith("+") and "dsh-memory" in line for line in result.stdout.splitlines())


@pytest.mark.parametrize("host", HOST_IDS)
def test_the_written_entry_actually_starts_the_server(fake, host):
    fake.seed(host)
    assert fake.setup(host, "--store-dir", str(fake.store)).returncode == 0
    entry = servers(host, parse(host, fake.path(host).read_text(encoding="utf-8")))["dsh-memory"]
    # Exactly what the config says; only the env is the test's (src importable, vectors off).
    answer = handshake([entry["command"], *entry["args"]], subprocess_env(DSH_MEMORY_VECTOR="off"))
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"]
    assert (fake.store).is_dir()  # it served the store the entry names


def test_a_named_host_without_a_config_file_gets_one_created_0600(fake):
    result = fake.setup("cursor", "zcode", "--store-dir", str(fake.store))
    assert result.returncode == 0, result.stdout + result.stderr
    for host in ("cursor", "zcode"):
        path = fake.path(host)
        assert oct(path.stat().st_mode & 0o777) == "0o600"
        assert not fake.backups(host)
    check_zcode_entry(json.loads(fake.path("zcode").read_text(encoding="utf-8"))["mcp"]["servers"]["dsh-memory"])
    assert json.loads(fake.path("cursor").read_text(encoding="utf-8")) == {
        "mcpServers": {"dsh-memory": {"command": os.path.abspath(PYTHON), "args": expected_stdio_args(fake.store)}}
    }


def test_without_host_names_only_installed_hosts_are_written(fake):
    fake.seed("codex")
    (fake.home / ".zcode").mkdir()  # ZCode installed, config file not yet written
    result = fake.setup("--store-dir", str(fake.store))
    assert result.returncode == 0, result.stdout + result.stderr
    assert fake.path("codex").is_file() and fake.path("zcode").is_file()
    for host in ("claude-code", "claude-desktop", "cursor", "vscode", "trae", "workbuddy", "windsurf", "gemini"):
        assert not fake.path(host).exists()
    assert "⏭ Cursor:没有发现" in result.stdout


def test_nothing_installed_and_nothing_named_exits_1_and_an_unknown_host_exits_2(fake):
    before = fake.snapshot()
    result = fake.setup("--store-dir", str(fake.store))
    assert result.returncode == 1 and "没有发现已安装的宿主" in result.stdout
    unknown = fake.setup("kursor")
    assert unknown.returncode == 2 and "不认识的宿主 kursor" in unknown.stderr
    assert fake.snapshot() == before


def test_a_config_that_does_not_parse_is_left_alone_and_reported(fake):
    path = fake.path("cursor")
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"mcpServers": {"a": 1,,}')
    result = fake.setup("cursor", "--store-dir", str(fake.store))
    assert result.returncode == 1
    assert "❌ Cursor" in result.stdout and "解析不了" in result.stdout
    assert path.read_bytes() == b'{"mcpServers": {"a": 1,,}' and not fake.backups("cursor")


def test_a_symlinked_config_is_written_through_and_stays_a_link(fake):
    real = fake.root / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    link = fake.path("cursor")
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    assert fake.setup("cursor", "--store-dir", str(fake.store)).returncode == 0
    assert link.is_symlink()
    assert "dsh-memory" in json.loads(real.read_text(encoding="utf-8"))["mcpServers"]


def test_a_zcode_entry_with_keys_outside_its_schema_is_repaired_keeping_known_ones(fake):
    path = fake.path("zcode")
    path.parent.mkdir(parents=True)
    old = {"type": "stdio", "command": "old", "description": "x", "env": {"DSH_MEMORY_VECTOR": "off"}}
    path.write_text(json.dumps({"mcp": {"servers": {"dsh-memory": old}}}), encoding="utf-8")
    assert fake.setup("zcode", "--store-dir", str(fake.store)).returncode == 0
    entry = json.loads(path.read_text(encoding="utf-8"))["mcp"]["servers"]["dsh-memory"]
    check_zcode_entry(entry)
    assert entry["env"] == {"DSH_MEMORY_VECTOR": "off"} and entry["command"] == os.path.abspath(PYTHON)


def test_the_store_defaults_to_the_one_other_hosts_already_use(fake):
    fake.seed("cursor")
    assert fake.setup("cursor", "--store-dir", str(fake.store)).returncode == 0
    env = fake.env()
    env.pop("DSH_MEMORY_STORE_DIR", None)
    result = fake.setup("zcode", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "沿用已配置宿主里的存储目录" in result.stdout
    entry = json.loads(fake.path("zcode").read_text(encoding="utf-8"))["mcp"]["servers"]["dsh-memory"]
    assert entry["args"][-2:] == ["--store-dir", str(fake.store)]


def test_run_as_the_console_script_the_entry_names_that_script(fake):
    script = fake.root / "bin" / "dsh-memory-mcp"
    script.parent.mkdir()
    script.write_text(
        f"#!{PYTHON}\nimport sys\nfrom dsh_memory_mcp.cli.main import main\nsys.exit(main())\n", encoding="utf-8"
    )
    script.chmod(0o755)
    result = run([str(script), "setup", "cursor", "--store-dir", str(fake.store)], fake.env())
    assert result.returncode == 0, result.stdout + result.stderr
    entry = json.loads(fake.path("cursor").read_text(encoding="utf-8"))["mcpServers"]["dsh-memory"]
    assert entry == {"command": str(script), "args": ["--store-dir", str(fake.store)]}
    answer = handshake([entry["command"], *entry["args"]], subprocess_env(DSH_MEMORY_VECTOR="off"))
    assert answer["result"]["serverInfo"]["name"]


# ------------------------------------------------------------------------------------------------
# --url: the URL form with the bearer token, 0600
# ------------------------------------------------------------------------------------------------


def _serve_json(store: Path, token: str) -> None:
    store.mkdir(parents=True, exist_ok=True)
    info = {"url": "http://127.0.0.1:8765/mcp", "pid": os.getpid(), "token": token, "version": "x", "startedAt": 1}
    path = store / "serve.json"
    path.write_text(json.dumps(info), encoding="utf-8")
    path.chmod(0o600)


def test_url_form_carries_the_token_from_serve_json_and_the_file_becomes_0600(fake):
    _serve_json(fake.store, "tok-from-serve-json")
    for host in ("cursor", "codex", "vscode", "claude-code", "zcode"):
        fake.seed(host)
    url = "http://127.0.0.1:8765/mcp"
    result = fake.setup(
        "cursor", "codex", "vscode", "claude-code", "zcode", "--store-dir", str(fake.store), "--url", url
    )
    assert result.returncode == 0, result.stdout + result.stderr
    bearer = {"Authorization": "Bearer tok-from-serve-json"}
    got = {
        h: servers(h, parse(h, fake.path(h).read_text(encoding="utf-8")))["dsh-memory"]
        for h in SEEDS
        if fake.path(h).exists()
    }
    assert got["cursor"] == {"url": url, "headers": bearer}
    assert got["vscode"] == {"type": "http", "url": url, "headers": bearer}
    assert got["claude-code"] == {"type": "http", "url": url, "headers": bearer}
    assert got["codex"] == {"url": url, "http_headers": bearer}
    for host in ("cursor", "codex", "vscode", "claude-code"):
        assert oct(fake.path(host).stat().st_mode & 0o777) == "0o600", host
    # ZCode has no URL form: the stdio command (which relays to a running serve by itself).
    check_zcode_entry(got["zcode"])
    assert got["zcode"]["args"] == expected_stdio_args(fake.store)
    assert "不支持 URL 条目" in result.stdout


def test_url_form_of_the_newer_hosts_uses_each_hosts_own_keys(fake):
    _serve_json(fake.store, "tok-from-serve-json")
    hosts = ("windsurf", "gemini", "copilot", "cline")
    for host in hosts:
        fake.seed(host)
    url = "http://127.0.0.1:8765/mcp"
    result = fake.setup(*hosts, "--store-dir", str(fake.store), "--url", url)
    assert result.returncode == 0, result.stdout + result.stderr
    bearer = {"Authorization": "Bearer tok-from-serve-json"}
    got = {h: servers(h, parse(h, fake.path(h).read_text(encoding="utf-8")))["dsh-memory"] for h in hosts}
    assert got["windsurf"] == {"serverUrl": url, "headers": bearer}  # Windsurf: `url` does not connect
    assert got["gemini"] == {"httpUrl": url, "headers": bearer}  # Gemini CLI: `url` would be SSE
    assert got["copilot"] == {"type": "http", "url": url, "headers": bearer, "tools": ["*"]}
    # Cline: no URL form written (its remote shape is not in its docs); the stdio command relays.
    assert got["cline"] == {"command": os.path.abspath(PYTHON), "args": expected_stdio_args(fake.store)}
    for host in ("windsurf", "gemini", "copilot"):
        assert oct(fake.path(host).stat().st_mode & 0o777) == "0o600", host
    removed = fake.setup(*hosts, "--remove")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    for host in hosts:
        assert fake.path(host).read_bytes() == SEEDS[host][1].encode("utf-8"), host


def test_copilot_stdio_entry_is_a_local_server_with_every_tool(fake):
    assert fake.setup("copilot", "--store-dir", str(fake.store)).returncode == 0
    entry = json.loads(fake.path("copilot").read_text(encoding="utf-8"))["mcpServers"]["dsh-memory"]
    assert entry == {
        "type": "local",
        "command": os.path.abspath(PYTHON),
        "args": expected_stdio_args(fake.store),
        "tools": ["*"],
    }


def test_url_form_falls_back_to_the_token_env_var_and_a_dry_run_masks_it(fake):
    fake.seed("cursor")
    env = fake.env(DSH_MEMORY_TOKEN="secret-env-token")
    args = ["cursor", "--store-dir", str(fake.store), "--url", "http://127.0.0.1:9/mcp"]
    dry = fake.setup(*args, "--dry-run", env=env)
    assert dry.returncode == 0 and "secret-env-token" not in dry.stdout and "<令牌已隐藏>" in dry.stdout
    assert fake.setup(*args, env=env).returncode == 0
    entry = json.loads(fake.path("cursor").read_text(encoding="utf-8"))["mcpServers"]["dsh-memory"]
    assert entry["headers"] == {"Authorization": "Bearer secret-env-token"}


# ------------------------------------------------------------------------------------------------
# doctor: which hosts are configured, with what
# ------------------------------------------------------------------------------------------------


def test_doctor_lists_configured_hosts_and_flags_a_missing_executable_and_a_different_store(fake):
    for host in ("cursor", "codex", "zcode"):
        fake.seed(host)
    assert fake.setup("cursor", "codex", "zcode", "--store-dir", str(fake.store)).returncode == 0
    cursor = fake.path("cursor")
    doc = json.loads(cursor.read_text(encoding="utf-8"))
    doc["mcpServers"]["dsh-memory"]["command"] = str(fake.root / "gone" / "dsh-memory-mcp")
    cursor.write_text(json.dumps(doc), encoding="utf-8")
    zcode = fake.path("zcode")
    doc = json.loads(zcode.read_text(encoding="utf-8"))
    doc["mcp"]["servers"]["dsh-memory"]["args"][-1] = str(fake.root / "another store")
    zcode.write_text(json.dumps(doc), encoding="utf-8")

    result = run([PYTHON, "-m", "dsh_memory_mcp", "doctor", "--store-dir", str(fake.store)], fake.env())
    lines = {line.split(":", 1)[0]: line for line in result.stdout.splitlines() if re.match(r"\S+ 宿主 ", line)}
    assert set(lines) == {"✅ 宿主 Codex", "❌ 宿主 Cursor", "⚠️ 宿主 ZCode"}, result.stdout
    assert f"可执行文件 {os.path.abspath(PYTHON)},存储 {fake.store}" in lines["✅ 宿主 Codex"]
    assert "不存在" in lines["❌ 宿主 Cursor"]
    assert "another store" in lines["⚠️ 宿主 ZCode"] and "不同" in lines["⚠️ 宿主 ZCode"]
    assert result.returncode == 1  # a host that cannot start us is a failure


def test_doctor_without_configured_hosts_says_how_to_set_them_up(fake):
    result = run([PYTHON, "-m", "dsh_memory_mcp", "doctor", "--store-dir", str(fake.store)], fake.env())
    assert "⚠️ 宿主配置:本机没有宿主配置了 dsh-memory ⇒ 运行 dsh-memory-mcp setup" in result.stdout


def test_an_executable_inside_uvs_cache_is_written_with_a_warning(fake):
    script = fake.root / ".cache" / "uv" / "archive-v0" / "abc123" / "bin" / "dsh-memory-mcp"
    script.parent.mkdir(parents=True)
    script.write_text(
        f"#!{PYTHON}\nimport sys\nfrom dsh_memory_mcp.cli.main import main\nsys.exit(main())\n", encoding="utf-8"
    )
    script.chmod(0o755)
    result = run([str(script), "setup", "cursor", "--store-dir", str(fake.store), "--dry-run"], fake.env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"⚠️ {script} 在 uv 的缓存里" in result.stdout and "pipx install" in result.stdout


def test_a_config_whose_server_table_is_an_empty_parent_gets_our_entry(fake):
    # ZCode's file may hold `"mcp": {}` (no "servers" yet): adding ours below it changes nothing else.
    path = fake.path("zcode")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{\n  "theme": "dark",\n  "mcp": {}\n}\n', encoding="utf-8")
    result = fake.setup("zcode", "--store-dir", str(fake.store))
    assert result.returncode == 0, result.stdout + result.stderr
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["theme"] == "dark"
    check_zcode_entry(written["mcp"]["servers"]["dsh-memory"])
    removed = fake.setup("zcode", "--remove")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert "dsh-memory" not in json.dumps(json.loads(path.read_text(encoding="utf-8")))
