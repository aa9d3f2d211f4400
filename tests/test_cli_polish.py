"""Small things a new user hit: help and README install notes, invalid numbers in
the environment said out loud, and exit codes of `get`/`import` (progress: tests/test_cli_terminal.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dsh_memory_mcp import config
from dsh_memory_mcp.cli import main as cli
from tests.conftest import PYTHON, subprocess_env

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
P = "[dsh-memory-mcp] "


def _run(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    command = [PYTHON, "-m", "dsh_memory_mcp", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, encoding="utf-8", env=env, timeout=60)


def test_the_help_shows_a_uvx_config_that_works_for_a_package_not_on_pypi(capsys):
    assert cli.main(["--help"]) == 0
    text = capsys.readouterr().out
    assert (
        '"command": "uvx",\n    "args": ["--from", "/path/to/dsh-memory-mcp", "dsh-memory-mcp", "--store-dir"' in text
    )
    assert '"args": ["dsh-memory-mcp"' not in text  # the form that fails (uvx would look on PyPI)


def test_the_readme_says_pipx_ensurepath_and_the_inspectors_node_floor():
    assert "pipx ensurepath" in README
    assert "Node ≥ 22" in README and "0.15" in README


def test_invalid_port_and_threads_fall_back_to_defaults_with_a_warning_each():
    env = {"DSH_MEMORY_EMBED_PORT": "80a", "DSH_MEMORY_EMBED_THREADS": " 0 ", "DSH_MEMORY_FORGET_CONFIRM_OVER": "-1"}
    env["DSH_MEMORY_EMBED_MODEL"] = "/m/bge-small.gguf"  # llama-server's numbers (the bundled model has its own)
    settings = config.resolve_settings(env=env, cwd="/")
    assert (settings.vector.port, settings.vector.threads, settings.forget_confirm_over) == (8199, 6, 3)
    assert settings.warnings == (
        "DSH_MEMORY_FORGET_CONFIRM_OVER='-1' 不是 0~1000000 之间的整数,已忽略,改用缺省值 3",
        "DSH_MEMORY_EMBED_PORT='80a' 不是 1~65535 之间的整数,已忽略,改用缺省值 8199",
        "DSH_MEMORY_EMBED_THREADS='0' 不是 1~512 之间的整数,已忽略,改用缺省值 6",
    )
    good = config.resolve_settings(
        env={"DSH_MEMORY_EMBED_PORT": "9000", "DSH_MEMORY_EMBED_THREADS": "2", "DSH_MEMORY_EMBED_MODEL": "m.gguf"},
        cwd="/",
    )
    assert (good.vector.port, good.vector.threads, good.warnings) == (9000, 2, ())


def test_the_server_and_a_subcommand_print_the_warning_on_stderr(tmp_path):
    # Vectors on, through an endpoint nobody answers: nothing spawned (not even the bundled model).
    env = subprocess_env(DSH_MEMORY_EMBED_PORT="99999", DSH_MEMORY_EMBED_ENDPOINT="http://127.0.0.1:9")
    env.pop("DSH_MEMORY_VECTOR", None)
    line = f"{P}⚠️ DSH_MEMORY_EMBED_PORT='99999' 不是 1~65535 之间的整数,已忽略,改用缺省值 8199"
    server = _run(["--store-dir", str(tmp_path / "s")], env)
    assert server.returncode == 0, server.stderr
    assert line in server.stderr.splitlines() and server.stdout == ""
    (tmp_path / "s").mkdir(exist_ok=True)
    stats = _run(["stats", "--store-dir", str(tmp_path / "s")], env)
    assert line.removeprefix(P) in stats.stderr.splitlines()  # a person's own command: no program prefix


@pytest.mark.parametrize(
    "data",
    [pytest.param("", id="empty"), pytest.param('not json\n{"no": "content"}\n', id="only-bad-lines")],
)
def test_import_with_nothing_valid_exits_1(tmp_path, data):
    env = subprocess_env(DSH_MEMORY_STORE_DIR=str(tmp_path / "s"))
    result = _run(["import", "-"], env, stdin=data)
    assert result.returncode == 1, result.stderr
    assert "没有一行可导入的记录" in result.stderr


def test_an_import_of_only_known_records_is_still_a_success(tmp_path):
    env = subprocess_env(DSH_MEMORY_STORE_DIR=str(tmp_path / "s"))
    line = '{"id": "aaaaaaaa-1111-2222-3333-444444444444", "scope": "global", "content": "x"}\n'
    assert _run(["import", "-"], env, stdin=line).returncode == 0
    again = _run(["import", "-"], env, stdin=line)
    assert again.returncode == 0 and "已存在 1 条" in again.stderr
