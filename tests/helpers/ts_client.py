"""Run a script of the TypeScript host-compatibility package (`tests/ts/`) and read its JSON answer.

The scripts use the official TypeScript MCP SDK client — what Claude Code, Cursor, VS Code and
the Inspector are built on — against the real server. Each reads one JSON config file and
prints one JSON document on stdout; `run_node` writes the config, runs `node`, and returns the
parsed document. `.ci/run` installs the package with `npm ci`; without it the tests skip locally
and FAIL in CI (`CI=true`, which `.ci/run` exports; `tests/helpers/require.py`), so the suite cannot pass there without having run.

Reusable by any test: `stdio_target(...)` describes a spawned `python -m dsh_memory_mcp`,
`http_target(url)` a running Streamable HTTP endpoint; `drive(target, steps)` runs
`tests/ts/drive.mjs` (see its header for the step ops).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.conftest import subprocess_env
from tests.helpers.require import require

TS_DIR = Path(__file__).resolve().parent.parent / "ts"
SDK_PACKAGE = TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
#: The 2.x client line (`@modelcontextprotocol/client`), pinned next to the 1.x SDK.
CLIENT_V2_PACKAGE = TS_DIR / "node_modules" / "@modelcontextprotocol" / "client" / "package.json"


def _locked_version(name: str) -> str | None:
    lock = json.loads((TS_DIR / "package-lock.json").read_text(encoding="utf-8"))
    entry = lock.get("packages", {}).get(f"node_modules/{name}")
    return str(entry["version"]) if entry else None


def require_ts_client(*, client_v2: bool = False) -> str:
    """The `node` executable; skip (locally) or fail (CI) when node or the package is missing.

    `client_v2`: the 2.x client package too, at the version the lock file pins (a node_modules
    installed before the lock changed has another one).
    """
    node = shutil.which("node")
    problem = None
    if node is None:
        problem = "node is not on PATH"
    elif not SDK_PACKAGE.is_file():
        problem = f"{TS_DIR}/node_modules is not installed (run: npm ci --prefix {TS_DIR})"
    elif client_v2 and (
        not CLIENT_V2_PACKAGE.is_file() or client_v2_version() != _locked_version("@modelcontextprotocol/client")
    ):
        problem = f"{TS_DIR}/node_modules predates package-lock.json (run: npm ci --prefix {TS_DIR})"
    require(problem is None, f"the TypeScript host tests need node and tests/ts/node_modules: {problem}")
    assert node is not None
    return node


def sdk_version() -> str:
    return str(json.loads(SDK_PACKAGE.read_text(encoding="utf-8"))["version"])


def client_v2_version() -> str:
    return str(json.loads(CLIENT_V2_PACKAGE.read_text(encoding="utf-8"))["version"])


def inspector_cli() -> list[str]:
    """The argv prefix of the MCP Inspector's CLI mode (``node …/launcher/build/index.js --cli``)."""
    import pytest

    node = require_ts_client()
    cli = (
        TS_DIR / "node_modules" / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
    )
    if not cli.is_file():
        pytest.fail(f"the Inspector is part of tests/ts/package.json but {cli} is missing: run npm ci")
    return [node, str(cli), "--cli"]


def stdio_target(
    store_dir: Path | str,
    errlog: Path,
    *,
    project: Path | str | None = None,
    cwd: Path | str | None = None,
    extra_args: list[str] | None = None,
    **env: str,
) -> dict[str, Any]:
    """A `python -m dsh_memory_mcp` over stdio, as a host config would spawn it."""
    args = ["-m", "dsh_memory_mcp", "--store-dir", str(store_dir)]
    if project is not None:
        args += ["--project", str(project)]
    args += extra_args or []
    return {
        "transport": "stdio",
        "command": sys.executable,
        "args": args,
        "env": subprocess_env(**env),
        "cwd": str(cwd) if cwd else os.getcwd(),
        "stderrPath": str(errlog),
    }


def http_target(url: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A running Streamable HTTP endpoint (e.g. `http://127.0.0.1:PORT/mcp`), `headers` on every request."""
    target: dict[str, Any] = {"transport": "http", "url": url}
    if headers:
        target["headers"] = headers
    return target


def run_node(script: str, config: dict[str, Any], *, workdir: Path, timeout: float = 90) -> Any:
    """Run `tests/ts/<script>` with `config` and return the JSON it printed last.

    :raises AssertionError: the script failed or printed no JSON (its stderr is in the message).
    """
    node = require_ts_client()
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / f"ts-config-{uuid.uuid4().hex[:8]}.json"
    config_path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    proc = subprocess.run(
        [node, str(TS_DIR / script), str(config_path)],
        cwd=TS_DIR,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        errlog = Path(config.get("target", {}).get("stderrPath") or workdir / "-")
        server_err = errlog.read_text(encoding="utf-8", errors="replace")[-3000:] if errlog.is_file() else ""
        raise AssertionError(
            f"node {script} exited {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\n"
            f"stderr:\n{proc.stderr[-4000:]}\nserver stderr:\n{server_err}"
        )
    return json.loads(lines[-1])


def drive(
    target: dict[str, Any],
    steps: list[dict[str, Any]],
    *,
    workdir: Path,
    roots: list[dict[str, str]] | None = None,
    client_info: dict[str, str] | None = None,
    sdk: str = "v1",
    mode: str | None = None,
    timeout: float = 90,
) -> dict[str, Any]:
    """Run `drive.mjs`: connect (declaring `roots` when given), run `steps`, return every outcome.

    `sdk`: "v1" (`@modelcontextprotocol/sdk` 1.x, handshake era) or "v2" (`@modelcontextprotocol/client`
    2.x, `mode` "auto" = 2026-07-28 when the server speaks it, "legacy" = the handshake).
    """
    config: dict[str, Any] = {"target": target, "steps": steps, "sdk": sdk}
    if mode is not None:
        config["mode"] = mode
    if roots is not None:
        config["roots"] = roots
    if client_info is not None:
        config["clientInfo"] = client_info
    result: dict[str, Any] = run_node("drive.mjs", config, workdir=workdir, timeout=timeout)
    return result
