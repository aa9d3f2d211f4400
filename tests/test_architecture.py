"""Dependencies flow one way; the SDK, httpx and numpy stay in the modules that own them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import subprocess_env

PKG = Path(__file__).resolve().parent.parent / "src" / "dsh_memory_mcp"

# module → the package modules it may import (SPEC layering: cli → server → tools → … → errors)
ALLOWED = {
    "errors": set(),
    "fileio": set(),
    "config": {"errors"},
    "records": {"errors"},
    "scopes": {"errors"},
    "locks": {"fileio", "errors", "scopes", "records"},
    "store": {"fileio", "errors", "config", "records", "scopes", "locks"},
    "scoring": {"records", "scopes", "errors"},
    "sidecar": {"fileio", "errors", "records"},
    "embedding": {"errors", "config"},
    "vectors": {"errors", "config", "records", "scopes", "store", "sidecar", "embedding"},
    "tools": {"errors", "config", "records", "scopes", "store", "scoring", "vectors"},
    "server": {"errors", "config", "tools", "store", "vectors"},
    "doctor": {"errors", "config", "scopes", "embedding", "sidecar"},
    "commands": {
        "errors",
        "config",
        "records",
        "scopes",
        "store",
        "tools",
        "server",
        "vectors",
        "sidecar",
        "embedding",
        "scoring",
        "doctor",
    },
    "cli": {"errors", "config", "server", "commands"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            if node.module == "dsh_memory_mcp":
                names.update(f"dsh_memory_mcp.{alias.name}" for alias in node.names)
    return names


def test_package_modules_only_import_downward():
    for path in sorted(PKG.glob("*.py")):
        mod = path.stem
        if mod in ("__init__", "__main__"):
            continue
        inner = {n.split(".")[1] for n in _imports(path) if n.startswith("dsh_memory_mcp.")} - {"__version__"}
        assert mod in ALLOWED, f"new module {mod}: add it to the layering table"
        assert inner <= ALLOWED[mod], f"{mod} imports {sorted(inner - ALLOWED[mod])}"


def test_only_server_imports_mcp_and_only_embedding_imports_httpx():
    for path in sorted(PKG.glob("*.py")):
        roots = {n.split(".")[0] for n in _imports(path)}
        if "mcp" in roots or "pydantic" in roots:
            assert path.stem == "server", path.name
        if "httpx" in roots:
            assert path.stem == "embedding", path.name


def test_importing_the_tools_layer_with_vectors_off_loads_neither_sdk_nor_numpy_nor_httpx():
    code = (
        "import sys, dsh_memory_mcp.tools, dsh_memory_mcp.store, dsh_memory_mcp.cli;"
        "print(sorted(m for m in ('mcp','numpy','httpx','pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
