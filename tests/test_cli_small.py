"""Small things a new user hit: a reader that leaves early (``| head``), ``search`` without a query,
an empty knowledge-graph observation, and the start-up success line in relay mode. Real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PYTHON, subprocess_env
from tests.helpers.serve_proc import running_serve

P = "[dsh-memory-mcp] "
TIMEOUT = 60


def _into_closed_pipe(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """Run with stdout a pipe whose reader is already gone (what `| head -3` becomes)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [PYTHON, "-m", "dsh_memory_mcp", *argv],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            timeout=TIMEOUT,
        )
    finally:
        os.close(write_end)


def _home_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True, exist_ok=True)
    (home / ".codex").mkdir(exist_ok=True)
    return subprocess_env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **extra)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipe semantics")
@pytest.mark.parametrize(
    "argv",
    [["setup", "--dry-run"], ["doctor"], ["setup", "--help"], ["list"], ["stats"]],
    ids=lambda a: " ".join(a),
)
def test_a_command_whose_reader_left_exits_with_its_own_code_and_no_broken_pipe_error(
    tmp_path: Path, argv: list[str]
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    env = _home_env(tmp_path, DSH_MEMORY_STORE_DIR=str(store))
    result = _into_closed_pipe(argv, env)
    err = result.stderr.decode("utf-8", "replace")
    assert "BrokenPipe" not in err and "Traceback" not in err and "意外错误" not in err, err
    assert result.returncode == 0, err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipe semantics")
def test_setup_whose_reader_left_still_writes_every_host(tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = _home_env(tmp_path, DSH_MEMORY_STORE_DIR=str(store))
    result = _into_closed_pipe(["setup", "cursor", "codex", "--store-dir", str(store)], env)
    assert result.returncode == 0, result.stderr.decode()
    home = tmp_path / "home"
    assert "dsh-memory" in json.loads((home / ".cursor" / "mcp.json").read_text(encoding="utf-8"))["mcpServers"]
    assert "[mcp_servers.dsh-memory]" in (home / ".codex" / "config.toml").read_text(encoding="utf-8")


def test_search_without_a_query_is_a_usage_error_exit_2(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    for argv in (["search"], ["search", "  "]):
        result = subprocess.run(
            [PYTHON, "-m", "dsh_memory_mcp", *argv],
            capture_output=True,
            text=True, encoding="utf-8",
            env=subprocess_env(DSH_MEMORY_STORE_DIR=str(tmp_path / "store")),
            timeout=TIMEOUT,
        )
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("❌ 参数错误:缺少查询词"), result.stderr


def test_an_empty_observation_in_a_graph_import_is_counted_as_refused_never_dropped_silently(tmp_path: Path) -> None:
    lines = [
        {"type": "entity", "name": "Ada", "entityType": "person", "observations": ["Wrote the first program", "", " "]},
        {"entities": [{"name": "Bob", "entityType": "person", "observations": [""]}], "relations": []},
    ]
    data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    result = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "import", "-"],
        input=data,
        capture_output=True,
        text=True, encoding="utf-8",
        env=subprocess_env(DSH_MEMORY_STORE_DIR=str(tmp_path / "store")),
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    err = result.stderr.splitlines()
    assert "导入完成:新增 1 条,已存在 0 条,跳过 0 行,拒绝 3 条" in err, result.stderr
    refused = [line for line in err if "CONTENT_EMPTY" in line]
    assert len(refused) == 3
    assert "第 1 行" in refused[0] and "第 2 条 observation" in refused[0]
    assert "第 1 行" in refused[1] and "第 3 条 observation" in refused[1]
    assert "第 2 行" in refused[2] and "entity Bob" in refused[2]


@pytest.mark.slow
def test_a_relayed_stdio_start_prints_the_success_line_help_names(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with running_serve(store, tmp_path / "serve.err"):
        result = subprocess.run(
            [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(store)],
            input=b"",
            capture_output=True,
            env=subprocess_env(),
            timeout=TIMEOUT,
        )
    err = result.stderr.decode("utf-8").splitlines()
    assert result.returncode == 0, err
    relay = [i for i, line in enumerate(err) if line.startswith(f"{P}连接方式 = relay(")]
    started = [i for i, line in enumerate(err) if line.startswith(f"{P}已启动 dsh-memory-mcp v") and "(stdio)" in line]
    assert relay and started and relay[0] < started[0], err
