"""The package as a user gets it: build the wheel, install it into a fresh venv like pipx, run it.

Nothing from this checkout's `src/` is importable in that venv (no PYTHONPATH), so the console
script, its entry point, the declared dependencies and the packaged files are what is tested.
Dependencies are resolved from the package index (pip's HTTP cache keeps a re-run fast).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dsh_memory_mcp import __version__

# Building and installing from the index takes ~40 s here; the module fixture runs inside the first
# test, so its timeout is wider than the suite's 120 s.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parent.parent
BIN = "Scripts" if sys.platform == "win32" else "bin"
EXE = ".exe" if sys.platform == "win32" else ""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2024-11-05",
        "capabilities": {},
        "clientInfo": {"name": "packaging-test", "version": "1.0.0"},
    },
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything that would make the checkout's sources importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


def run(cmd: list[str], *, timeout: float, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, encoding="utf-8", timeout=timeout, **kw)
    assert proc.returncode == 0, f"{cmd} → {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the built wheel, the venv it is installed in)."""
    tmp = tmp_path_factory.mktemp("packaging")
    dist = tmp / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        timeout=120,
        env=clean_env(),
        cwd=str(tmp),
    )
    wheels = list(dist.glob("dsh_memory_mcp-*.whl"))
    assert len(wheels) == 1, wheels
    venv = tmp / "venv"
    # No pip of its own (ensurepip costs seconds): the test environment's pip installs into it (`--python`), as
    # pipx's shared pip does; what lands in the venv is the wheel and its declared dependencies only (no .pyc
    # written at install: nothing here depends on them).
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120, env=clean_env(), cwd=str(tmp))
    target = venv / BIN / f"python{EXE}"
    run(
        [sys.executable, "-m", "pip", "--python", str(target), "install", "-q", "--no-compile", str(wheels[0])],
        timeout=240,
        env=clean_env(),
        cwd=str(tmp),
    )
    return wheels[0], venv


def test_the_wheel_ships_the_typing_marker_and_the_console_script(installed):
    wheel, _ = installed
    assert wheel.name == f"dsh_memory_mcp-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = zf.read(f"dsh_memory_mcp-{__version__}.dist-info/entry_points.txt").decode("utf-8")
    assert "dsh_memory_mcp/py.typed" in names
    assert "dsh_memory_mcp/__main__.py" in names
    # The web page's files are package data, read with importlib.resources at run time.
    for name in ("index.html", "app.js", "app.css"):
        assert f"dsh_memory_mcp/transports/web_static/{name}" in names
    assert "dsh-memory-mcp = dsh_memory_mcp.cli.main:main" in entry_points
    assert not any(n.startswith(("tests/", "scripts/")) for n in names)


def test_the_installed_console_script_prints_its_exact_version(installed, tmp_path):
    _, venv = installed
    proc = run([str(venv / BIN / f"dsh-memory-mcp{EXE}"), "--version"], timeout=30, env=clean_env(), cwd=str(tmp_path))
    assert proc.stdout == "dsh-memory-mcp 0.1.0\n"
    assert __version__ == "0.1.0"


def test_the_installed_console_script_answers_a_raw_stdio_handshake(installed, tmp_path):
    _, venv = installed
    store = tmp_path / "store"
    lines = "".join(json.dumps(m) + "\n" for m in (INITIALIZE, INITIALIZED, TOOLS_LIST))

    proc = subprocess.run(
        [str(venv / BIN / f"dsh-memory-mcp{EXE}"), "--store-dir", str(store)],
        input=lines,  # stdin is closed after these lines: the server answers, then exits 0
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        env=clean_env(DSH_MEMORY_VECTOR="off"),
        cwd=str(tmp_path),
    )

    assert proc.returncode == 0, proc.stderr
    responses = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert [r.get("id") for r in responses] == [1, 2], proc.stdout
    info = responses[0]["result"]["serverInfo"]
    assert (info["name"], info["version"]) == ("dsh-memory-mcp", "0.1.0")
    names = {t["name"] for t in responses[1]["result"]["tools"]}
    assert names == {"memory_save", "memory_search", "memory_list", "memory_get", "memory_forget"}
    assert f"store-dir = {store}" in proc.stderr
    assert store.is_dir()
