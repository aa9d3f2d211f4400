"""A warning logged after a command's handlers are gone (a background thread still running while the
process exits) is said like the command's own lines: prefixed and, under an English locale, in English —
not by `logging.lastResort` as the bare Chinese template."""

from __future__ import annotations

import subprocess

from tests.conftest import PYTHON, subprocess_env

# The loss warning of `store/shared.py`, which a scope loaded in the background may log at exit.
CHILD = r"""
import logging, threading
from dsh_memory_mcp.cli import logs
logs.configure_stderr_logging(False)
logs.remove_handlers()  # the command returned; a thread is still loading a scope
def late():
    logging.getLogger("dsh_memory_mcp.store.shared").warning(
        "作用域 %s 的文件 %s 中少了 %d 条本服务确认保存过、从未删除或取代的记忆(多半是不加锁的写入者"
        "用旧快照整体覆盖了文件)。%s。", "global", "/s/global.jsonl", 1, "recover")
    logging.getLogger("dsh_memory_mcp.store.shared").info("an info line after the end stays unsaid")
t = threading.Thread(target=late); t.start(); t.join()
"""


def _run(lang: str) -> str:
    env = subprocess_env(LANG=lang)
    proc = subprocess.run(
        [PYTHON, "-c", CHILD], env=env, capture_output=True, text=True, encoding="utf-8", timeout=60, check=True
    )
    assert proc.stdout == ""
    return proc.stderr


def test_a_late_warning_is_prefixed_and_english_under_an_english_locale():
    err = _run("en_US.UTF-8")
    [line] = err.splitlines()
    assert line.startswith("[dsh-memory-mcp] scope global")
    assert "少了" not in line and "an info line" not in err


def test_a_late_warning_is_prefixed_and_chinese_by_default():
    err = _run("C.UTF-8")
    [line] = err.splitlines()
    assert line.startswith("[dsh-memory-mcp] 作用域 global 的文件 /s/global.jsonl 中少了 1 条")


# A thread logging while the command's handlers come and go (start-up reconfigures them, the end
# removes them): no line may ever find the logger without a handler and reach `logging.lastResort`.
CHURN = r"""
import logging, sys, threading
from dsh_memory_mcp.cli import logs
sys.setswitchinterval(1e-6)
logs.configure_stderr_logging(False)
stop = threading.Event()
def chatter():
    while not stop.is_set():
        logging.getLogger("dsh_memory_mcp.store.shared").warning("作用域 %s 有话要说", "global")
t = threading.Thread(target=chatter); t.start()
for _ in range(3000):
    logs.remove_handlers()
    logs.configure_stderr_logging(False)
stop.set(); t.join()
"""


def test_a_thread_logging_while_handlers_change_never_reaches_the_last_resort_handler():
    proc = subprocess.run(
        [PYTHON, "-c", CHURN],
        env=subprocess_env(LANG="en_US.UTF-8"),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=True,
    )
    lines = proc.stderr.splitlines()
    assert len(lines) > 100  # the thread did talk meanwhile
    bare = [line for line in lines if not line.startswith("[dsh-memory-mcp] ")]
    assert bare == [], bare[:3]
