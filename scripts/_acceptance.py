"""What the acceptance scripts share: the checklist printer and the child-process environment.

Imported as a sibling module (`python scripts/acceptance_*.py` puts `scripts/` on sys.path).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parent.parent / "src"


class Checks:
    """`✓`/`✗`/`-` lines as the checks run, a summary, and the exit code (0 only if none failed)."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed: list[str] = []
        self.skipped = 0

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        mark = "✓" if ok else "✗"
        print(f"{mark} {what}" + (f"({detail})" if detail else ""))
        if ok:
            self.passed += 1
        else:
            self.failed.append(what)
        return ok

    def skip(self, what: str, why: str) -> None:
        self.skipped += 1
        print(f"- 跳过 {what}:{why}")

    def summary(self) -> int:
        total = self.passed + len(self.failed)
        print(f"\n{self.passed}/{total} 项通过,{len(self.failed)} 项失败,{self.skipped} 项跳过")
        for what in self.failed:
            print(f"  ✗ {what}")
        return 0 if not self.failed else 1


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment for a spawned server; in a source checkout it runs this tree's code."""
    env = dict(os.environ)
    if (SRC / "dsh_memory_mcp").is_dir():
        env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def structured(result: Any) -> dict[str, Any]:
    """A tool result's structuredContent, whichever spelling the client object uses."""
    sc = getattr(result, "structured_content", None)
    if sc is None:
        sc = getattr(result, "structuredContent", None)
    return dict(sc or {})
