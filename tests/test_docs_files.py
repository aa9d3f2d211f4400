"""llms.txt, mcp.json.example, CHANGELOG.md and the README's quick-start agree with the code.

The README's commands are executed (through `python -m dsh_memory_mcp`, the same `main()` as the
console script), its start-up lines are compared with what the server really prints, and every host
config it shows must be one the probe script can read — so the docs cannot drift.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_memory_mcp import __version__
from dsh_memory_mcp.cli import hosts
from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
TOOLS = ("memory_save", "memory_search", "memory_list", "memory_get", "memory_forget")
#: The example paths the README uses, replaced by temp paths when its text is compared with output.
README_STORE = "/home/me/.dsh-memory-store"
README_PROJECT = "/home/me/app"


def fences() -> list[tuple[str, str]]:
    """Every fenced block of the README as (language, body), fences paired in order."""
    out: list[tuple[str, str]] = []
    lang: str | None = None
    body: list[str] = []
    for line in README.splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                out.append((lang, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    return out


def fenced(lang: str) -> list[str]:
    return [body for block_lang, body in fences() if block_lang == lang]


def run_module(*args: str, stdin: str = "", cwd: Path | None = None, timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", "dsh_memory_mcp", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        env=subprocess_env(),
        cwd=str(cwd or ROOT),
    )


# --------------------------------------------------------------------------------------------
# mcp.json.example
# --------------------------------------------------------------------------------------------


def test_mcp_json_example_is_valid_json_with_the_readmes_command_and_args():
    example = json.loads((ROOT / "mcp.json.example").read_text(encoding="utf-8"))
    entry = example["mcpServers"]["dsh-memory"]
    readme_entries = [
        json.loads(block)["mcpServers"]["dsh-memory"] for block in fenced("json") if '"mcpServers"' in block
    ]
    assert readme_entries, "the README shows no mcpServers config"
    assert entry["command"] == readme_entries[0]["command"]
    assert entry["args"] == readme_entries[0]["args"]
    assert entry["args"][0] == "--store-dir"
    assert "--project" not in entry["args"]  # the README: never hard-code --project in a global config


def test_every_variable_in_mcp_json_example_is_documented_in_the_readme():
    entry = json.loads((ROOT / "mcp.json.example").read_text(encoding="utf-8"))["mcpServers"]["dsh-memory"]
    assert entry["env"], "the example shows at least one environment variable"
    for name in entry["env"]:
        assert f"| `{name}` |" in README, name


def test_the_cli_accepts_the_example_args(tmp_path):
    entry = json.loads((ROOT / "mcp.json.example").read_text(encoding="utf-8"))["mcpServers"]["dsh-memory"]
    store = tmp_path / "store"
    args = [str(store) if a == README_STORE else a for a in entry["args"]]
    proc = run_module(*args, cwd=tmp_path)  # stdin closed at once: start, then a clean exit
    assert proc.returncode == 0, proc.stderr
    assert f"[dsh-memory-mcp] store-dir = {store}" in proc.stderr.splitlines()


def test_doctor_reads_every_stdio_host_config_the_readme_shows_as_ours_with_its_store():
    blocks = [b for b in fenced("json") if '"dsh-memory"' in b and '"command"' in b]  # stdio entries
    by_table = {h.table: h for h in hosts.HOSTS}  # one host of each shape
    shapes = set()
    for block in blocks:
        document = json.loads(block)
        table = ("mcp", "servers") if "mcp" in document else (next(iter(document)),)
        [entry] = hosts.read_entries(by_table[table], "config.json", block, env={})
        shapes.add(table)
        assert entry.name == "dsh-memory" and entry.command, block
        assert entry.store == README_STORE, block
    assert shapes == {("mcpServers",), ("mcp", "servers"), ("servers",)}
    [toml] = [b for b in fenced("toml") if "[mcp_servers.dsh-memory]" in b and "command" in b]
    [entry] = hosts.read_entries(hosts.by_name("codex"), "config.toml", toml, env={})  # type: ignore[arg-type]
    assert entry.store == README_STORE

def test_every_url_based_host_config_in_the_readme_is_json_with_a_bearer_header():
    blocks = [b for b in fenced("json") if '"dsh-memory"' in b and '"url"' in b]
    assert len(blocks) >= 2  # mcpServers-style, VS Code
    for block in blocks:
        data = json.loads(block)
        entry = (data.get("mcpServers") or data.get("servers"))["dsh-memory"]
        assert entry["url"] == "http://127.0.0.1:7766/mcp"
        assert entry["headers"]["Authorization"].startswith("Bearer ")


# --------------------------------------------------------------------------------------------
# llms.txt
# --------------------------------------------------------------------------------------------


def test_llms_txt_follows_the_convention():
    text = (ROOT / "llms.txt").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "# dsh-memory-mcp"
    first = next(line for line in lines[1:] if line.strip())
    assert first.startswith("> ")
    assert re.search(r"^## ", text, flags=re.M)
    for tool in TOOLS:
        assert tool in text


def test_every_llms_txt_link_points_at_a_file_that_exists():
    text = (ROOT / "llms.txt").read_text(encoding="utf-8")
    links = re.findall(r"\[[^\]]+\]\(([^)\s]+)\)", text)
    targets = {link.split("#", 1)[0] for link in links if not re.match(r"[a-z]+://", link)}
    assert {"README.md", "AGENTS.md"} <= targets
    missing = sorted(t for t in targets if not (ROOT / t).exists())
    assert not missing, missing


# --------------------------------------------------------------------------------------------
# CHANGELOG.md
# --------------------------------------------------------------------------------------------


def test_the_changelog_has_unreleased_and_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^version = "([^"]+)"$', pyproject, flags=re.M)
    assert match
    version = match.group(1)
    assert version == __version__
    assert "## [Unreleased]" in text
    assert re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, flags=re.M)
    assert text.index("## [Unreleased]") < text.index(f"## [{version}]")
    assert "### Added" in text


# --------------------------------------------------------------------------------------------
# The README's quick-start
# --------------------------------------------------------------------------------------------


def test_the_readmes_version_command_prints_what_the_spec_says():
    assert "`dsh-memory-mcp --version`" in README
    proc = run_module("--version", timeout=30)
    assert proc.returncode == 0
    assert proc.stdout == f"dsh-memory-mcp {__version__}\n"


def test_the_readmes_help_command_starts_with_name_and_version():
    assert "`dsh-memory-mcp --help`" in README
    proc = run_module("--help", timeout=30)
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0].startswith(f"dsh-memory-mcp {__version__} — ")
    for flag in ("--store-dir", "--project", "--help", "--version"):
        assert flag in proc.stdout


def test_the_readmes_start_up_lines_are_what_the_server_prints(tmp_path):
    blocks = [b for b in fenced("") if "[dsh-memory-mcp] store-dir = " in b]
    assert blocks, "the README shows the start-up lines"
    store, project = tmp_path / "store", tmp_path / "app"
    project.mkdir()
    proc = run_module("--store-dir", str(store), "--project", str(project), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    actual = proc.stderr.splitlines()
    for line in blocks[0].strip().splitlines():
        expected = line.replace(README_STORE, str(store)).replace(README_PROJECT, str(project))
        assert expected in actual, f"README line {line!r} not printed; stderr:\n{proc.stderr}"


def test_the_readmes_handshake_block_answers_with_one_json_rpc_line(tmp_path):
    commands = [
        line
        for block in fenced("bash")
        for line in block.replace("\\\n", " ").splitlines()
        if line.lstrip().startswith("echo '{") and "| dsh-memory-mcp" in line
    ]
    if not commands:
        pytest.skip("the README has no `echo '<initialize>' | dsh-memory-mcp --store-dir …` block yet")
    for command in commands:
        payload = re.search(r"echo '(.*?)'", command)
        assert payload, command
        request = json.loads(payload.group(1))
        args = command.split("| dsh-memory-mcp", 1)[1].split()
        args = [str(tmp_path / "store") if a.startswith(("/tmp/", "~", "/home/")) else a for a in args]
        proc = run_module(*args, stdin=payload.group(1) + "\n", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        out = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
        assert len(out) == 1 and out[0]["id"] == request["id"]
        assert out[0]["result"]["serverInfo"]["name"] == "dsh-memory-mcp"
