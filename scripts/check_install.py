#!/usr/bin/env python3
"""Check a deployment: `python scripts/check_install.py [--store-dir DIR] [--project DIR]`.

The same report as `dsh-memory-mcp doctor` (Python, SDK, dependencies, store directory, vector
backend, sidecars), one line per check with ✅/⚠️/❌ and the fix; exit 1 when something is broken.
Read-only: creates and writes nothing, starts no process.

Works from a checkout without installing: `src/` is put on sys.path when the package is not
importable. Pass the same --store-dir/--project as in your MCP configuration to check the store
the server will really use (environment variables DSH_MEMORY_* apply as usual).
"""

from __future__ import annotations

import argparse
import os
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="check_install.py",
        description="dsh-memory-mcp 部署自检(只读:不建目录、不写文件、不启动进程)",
        allow_abbrev=False,
    )
    parser.add_argument("--store-dir", "--store", dest="store_dir", metavar="DIR", help="存储目录(同 MCP 配置里的值)")
    parser.add_argument("--project", "--project-dir", dest="project_dir", metavar="DIR", help="工作区目录")
    args = parser.parse_args(argv)

    if os.path.isdir(os.path.join(SRC, "dsh_memory_mcp")) and SRC not in sys.path:
        # A checkout: prefer its sources over whatever may be installed elsewhere.
        sys.path.insert(0, SRC)
    try:
        from dsh_memory_mcp import config
        from dsh_memory_mcp.cli import doctor
    except ImportError as exc:
        print(f"❌ dsh-memory-mcp:无法导入({exc}) ⇒ 在仓库根目录运行,或先 pip install -e .", file=sys.stderr)
        return 1
    settings = config.resolve_settings(store_dir=args.store_dir, project_dir=args.project_dir)
    return doctor.main([], settings, out=sys.stdout, err=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
