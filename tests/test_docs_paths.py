"""Every file, module and name that AGENTS.md and docs/design.md point at exists in the tree.

The docs for people who change the code are only useful while they are true: a path to a file that
was removed, a module that was merged away, or `SharedStore._something` that no longer exists sends
the next engineer looking for nothing. Paths are checked anywhere in the text; qualified names
(`module.name`, `Class.attribute`, `path.py::name`) only inside code spans.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "src" / "dsh_memory_mcp"
DOCS = ("AGENTS.md", "docs/design.md")
LAYER_DIRS = ("store", "search", "service", "transports", "cli")

_REPO_PATH = re.compile(r"(?<![\w<>/.-])((?:src|tests|scripts|docs|\.ci)/[\w./-]*\w)")
_PKG_PATH = re.compile(rf"(?<![\w<>/.-])((?:{'|'.join(LAYER_DIRS)}|web_static)/[\w./-]*\w)")
_BARE_MODULE = re.compile(r"(?<![\w<>/.-])(\w+\.(?:py|js|html))\b")
_DOTTED = re.compile(r"\bdsh_memory_mcp(?:\.\w+)+")
_SPAN = re.compile(r"`([^`\n]+)`")
_QUALIFIED = re.compile(r"(?<![\w./<-])([A-Za-z_]\w*)\.([A-Za-z_]\w*)(?![\w/-])")
_NODE = re.compile(r"([\w./-]+\.py)::(\w+)")


def _files_named(name: str) -> list[Path]:
    return [p for p in (*PKG.rglob(name), *(ROOT / "tests").rglob(name), *(ROOT / "scripts").rglob(name))]


def _exists(path: Path) -> bool:
    """`path` exists, or names a module and a name in it (`tests/helpers/clock.FakeClock`)."""
    if path.exists():
        return True
    module, _, name = path.name.rpartition(".")
    file = path.with_name(module + ".py")
    return bool(module) and file.is_file() and _defines(file, name)


def missing_paths(text: str) -> list[str]:
    """The paths and modules `text` names that are not in the tree (package-relative ones and bare
    file names only inside code spans, where they are names, not prose like "search/save")."""
    spans = "\n".join(_SPAN.findall(text))
    missing = []
    for path in _REPO_PATH.findall(text):
        if not _exists(ROOT / path):
            missing.append(path)
    for path in _PKG_PATH.findall(spans):
        folder = PKG / "transports" if path.startswith("web_static/") else PKG
        if not _exists(folder / path):
            missing.append(path)
    for name in _BARE_MODULE.findall(spans):
        if not _files_named(name):
            missing.append(name)
    for dotted in _DOTTED.findall(text):
        parts = dotted.split(".")
        # the longest prefix that is a module (the rest may be a name in it: `cli.main:main`)
        if not any(
            (ROOT / "src" / Path(*parts[:k])).with_suffix(".py").exists() or (ROOT / "src" / Path(*parts[:k])).is_dir()
            for k in range(len(parts), 1, -1)
        ):
            missing.append(dotted)
    return missing


@cache
def _sources() -> dict[str, list[Path]]:
    """Module basename → its files (`scoring` → search/scoring.py), and the package's own modules."""
    out: dict[str, list[Path]] = {}
    for path in PKG.rglob("*.py"):
        out.setdefault(path.stem, []).append(path)
    return out


@cache
def _classes() -> dict[str, list[Path]]:
    """Class name → the files that define it (in src/ and tests/helpers/)."""
    out: dict[str, list[Path]] = {}
    for path in (*PKG.rglob("*.py"), *(ROOT / "tests" / "helpers").rglob("*.py")):
        for name in re.findall(r"^\s*class (\w+)", path.read_text(encoding="utf-8"), flags=re.M):
            out.setdefault(name, []).append(path)
    return out


def _defines(path: Path, name: str) -> bool:
    text = path.read_text(encoding="utf-8")
    return bool(
        re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", text, flags=re.M)
        or re.search(rf"^\s*(?:self\.)?{re.escape(name)}\s*(?::[^=\n]*)?=", text, flags=re.M)
        or re.search(rf"^\s+{re.escape(name)}\s*:", text, flags=re.M)  # a dataclass field
        or re.search(rf"\bimport\b[^\n]*\b{re.escape(name)}\b", text)
    )


def missing_names(text: str) -> list[str]:
    """The `module.name`, `Class.attribute` and `file.py::name` in code spans that are not defined."""
    missing = []
    for span in _SPAN.findall(text):
        for file, name in _NODE.findall(span):
            found = [p for p in _files_named(Path(file).name) if str(p).endswith(file)]
            if not any(_defines(p, name) for p in found):
                missing.append(f"{file}::{name}")
        for owner, name in _QUALIFIED.findall(re.sub(r"[\w./-]+\.(?:py|js|html|json|md|toml|txt)\b", "", span)):
            files = _sources().get(owner) or _classes().get(owner)
            if files is None:
                continue  # not one of ours (`os.replace`, `json.loads`, a file name, an English word)
            if not any(_defines(p, name) for p in files):
                missing.append(f"{owner}.{name}")
    return missing


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_and_module_the_doc_names_exists(doc: str) -> None:
    assert missing_paths((ROOT / doc).read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("doc", DOCS)
def test_every_qualified_name_the_doc_names_is_defined(doc: str) -> None:
    assert missing_names((ROOT / doc).read_text(encoding="utf-8")) == []


def test_the_checks_see_a_path_a_module_and_a_name_that_are_gone() -> None:
    text = (
        "see `store/shared.py` and `store/gone.py`, tests/test_docs_paths.py and tests/test_gone.py,"
        " `vanished.py`, `dsh_memory_mcp.cli.main` and `dsh_memory_mcp.nowhere`, `scripts/bench.py`;"
        " `SharedStore.counters`, `SharedStore._no_such_thing`, `scoring.NO_SUCH_CONSTANT`,"
        " `tests/test_config.py::LANDS`, `tests/test_config.py::NO_SUCH`, `os.replace`"
    )
    assert missing_paths(text) == ["tests/test_gone.py", "store/gone.py", "vanished.py", "dsh_memory_mcp.nowhere"]
    assert missing_names(text) == [
        "SharedStore._no_such_thing",
        "scoring.NO_SUCH_CONSTANT",
        "tests/test_config.py::NO_SUCH",
    ]
