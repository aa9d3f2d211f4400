"""The human CLI in the user's language: Chinese by default, English when the locale asks (`en*`).

The table (`texts.EN`) must hold every template the code passes to `t`/`N_`, with the same
format fields; real subprocesses under ``LANG=en_US.UTF-8`` show the English texts, while the tools'
own texts (what `save`/`list` print from `memory_*`) stay as the tools write them.
"""

from __future__ import annotations

import ast
import string
import subprocess
from pathlib import Path

import pytest

from dsh_memory_mcp import config, texts
from dsh_memory_mcp.cli import messages
from tests.conftest import PYTHON, subprocess_env

CLI = Path(__file__).resolve().parent.parent / "src" / "dsh_memory_mcp" / "cli"


def _templates() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("t", "N_"):
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.append((path.name, node.lineno, first.value))
    return found


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def test_every_template_the_cli_passes_to_t_has_an_english_entry_with_the_same_fields():
    templates = _templates()
    assert len(templates) > 100  # the scan sees the CLI's templates (it is not looking at nothing)
    missing = [
        (f, line, text[:60]) for f, line, text in templates if text not in texts.EN and text != messages.HELP_ZH
    ]
    assert missing == []
    for zh, en in texts.EN.items():
        assert _fields(zh) == _fields(en), zh[:60]
        assert en.format_map({**messages.GLOBALS, **{k: "x" for k in _fields(en)}})  # formats cleanly


@pytest.mark.parametrize(
    ("env", "language"),
    [
        ({}, "zh"),
        ({"LANG": "en_US.UTF-8"}, "en"),
        ({"LANG": "en"}, "en"),
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LANG": "C.UTF-8"}, "zh"),
        ({"LANG": "en_US.UTF-8", "LC_ALL": "zh_CN.UTF-8"}, "zh"),  # LC_ALL wins
        ({"LANG": "zh_CN.UTF-8", "LC_MESSAGES": "en_GB.UTF-8"}, "en"),  # LC_MESSAGES beats LANG
        ({"LC_ALL": "  ", "LANG": "en_US.UTF-8"}, "en"),  # a blank value counts as unset
    ],
)
def test_the_language_follows_lc_all_then_lc_messages_then_lang(env, language):
    assert config.ui_language(env) == language


def _run(*args: str, lang: str | None, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = subprocess_env()
    if lang is not None:
        env["LANG"] = lang
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
    )


def test_help_and_usage_errors_are_english_under_an_english_locale_and_chinese_otherwise():
    english = _run("--help", lang="en_US.UTF-8")
    assert english.returncode == 0
    assert english.stdout.startswith("dsh-memory-mcp ")
    assert "\nUsage:\n" in english.stdout and "Exit codes:" in english.stdout
    assert "  save        save a memory (memory_save itself)" in english.stdout
    chinese = _run("--help", lang="C.UTF-8")
    assert "\n用法:\n" in chinese.stdout and "Exit codes:" not in chinese.stdout
    wrong = _run("lst", lang="en_US.UTF-8")
    assert wrong.returncode == 2
    assert wrong.stderr.splitlines()[:2] == [
        "[dsh-memory-mcp] ❌ usage error: unknown command or stray argument lst (commands: doctor, duplicates, edit, "
        "export, forget, get, hook, import, list, move, recover, reembed, save, search, serve, setup, stats, web)",
        "[dsh-memory-mcp] ⇒ did you mean the command list?",
    ]
    helped = _run("serve", "--help", lang="en_US.UTF-8")
    assert "The default port is\nalways 7766" in helped.stdout and "--new-token" in helped.stdout


def test_in_english_save_says_its_usage_error_and_its_sentence_in_english_and_stdout_is_still_the_id(tmp_path):
    saved = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "save"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=subprocess_env(LANG="en_US.UTF-8", DSH_MEMORY_STORE_DIR=str(tmp_path / "s")),
        timeout=60,
    )
    assert saved.returncode == 2
    assert saved.stderr.startswith('❌ usage error: nothing to save: save "CONTENT"')  # a person's: no prefix
    ok = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "save", "the build uses uv"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=subprocess_env(LANG="en_US.UTF-8", DSH_MEMORY_STORE_DIR=str(tmp_path / "s")),
        timeout=60,
    )
    assert ok.returncode == 0
    ident = ok.stdout.strip()
    assert len(ident) == 36
    # The tool's sentence is the model's Chinese; the CLI says the same from the structured result.
    assert ok.stderr == f"Saved memory {ident[:8]} @ global\n"


def test_setup_speaks_english_under_an_english_locale(tmp_path):
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    env = subprocess_env(LANG="en_US.UTF-8", HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    run = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "setup", "cursor", "--store-dir", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "dsh-memory-mcp setup: writing the dsh-memory entry into each host's config"
    assert lines[2] == f"  store: {tmp_path / 's'} (--store-dir)"
    done = next(line for line in lines if line.startswith("✅ Cursor: written: "))
    assert done.endswith("⇒ takes effect after restarting Cursor (or refreshing in Settings → MCP)")
