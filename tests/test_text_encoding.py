"""Every text file and text-mode pipe in the repository names its encoding.

A default encoding is the machine's locale: on a Windows console or a `LANG=C` box, Chinese memory text
read or written without `encoding="utf-8"` is mangled or raises. CI runs with PYTHONWARNDEFAULTENCODING=1,
but that only sees the lines a run executes; this scan sees every call, so a new test that forgets it fails
here on any machine.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ROOTS = [REPO / "src", REPO / "tests", REPO / "scripts"]


def _text_mode_without_encoding(node: ast.Call) -> bool:
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    if "encoding" in keywords:
        return False
    for flag in ("text", "universal_newlines"):
        value = keywords.get(flag)
        if isinstance(value, ast.Constant) and value.value is True:
            return True
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name == "read_text":
        return not node.args
    if name == "write_text":
        return len(node.args) == 1
    if name != "open":
        return False
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in {"os", "opener"}:
        return False  # os.open (a descriptor) and urllib's opener.open
    builtin = isinstance(func, ast.Name)
    mode_index = 1 if builtin else 0
    mode: object = "r"
    if len(node.args) > mode_index:
        mode = node.args[mode_index].value if isinstance(node.args[mode_index], ast.Constant) else None
    if "mode" in keywords:
        mode = keywords["mode"].value if isinstance(keywords["mode"], ast.Constant) else None
    if builtin and not node.args:
        return False
    return isinstance(mode, str) and "b" not in mode


def test_no_text_file_or_pipe_relies_on_the_locale_s_encoding():
    found = []
    for root in ROOTS:
        for path in sorted(root.rglob("*.py")):
            if "node_modules" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and _text_mode_without_encoding(node):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert found == [], 'add encoding="utf-8" to: ' + ", ".join(found)
