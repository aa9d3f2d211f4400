"""The command line (docs/design.md: Command line): real `python -m dsh_memory_mcp` subprocesses for every exit code and
diagnostic, plus plain function calls for the parser and the start-up diagnostics.

"Nothing created" is checked by snapshotting the test's temp dir, which holds everything the
process could touch: the store (`DSH_MEMORY_STORE_DIR`, `--store-dir`), HOME (default store) and
XDG_STATE_HOME (platformdirs' log dir on Linux).
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsh_memory_mcp import __version__, errors
from dsh_memory_mcp.cli import main as cli
from dsh_memory_mcp.cli import parser
from tests.conftest import PYTHON, subprocess_env

FIRST_LINE = f"dsh-memory-mcp {__version__} — 把 DSH 的长期记忆库暴露成独立 MCP 服务(stdio)"
P = "[dsh-memory-mcp] "
HINT = "用 --help 查看用法"
FAKE_SERVER = Path(__file__).parent / "helpers" / "cli_fake_server.py"
RUN_TIMEOUT = 30
SPEC_ENV_VARS = (
    "DSH_MEMORY_PROJECT",
    "DSH_MEMORY_STORE_DIR",
    "DSH_MEMORY_SCOPE_ALL",
    "DSH_MEMORY_VECTOR",
    "DSH_MEMORY_EMBED_ENDPOINT",
    "DSH_MEMORY_EMBED_EXE",
    "DSH_MEMORY_EMBED_MODEL",
    "DSH_MEMORY_EMBED_PORT",
    "DSH_MEMORY_EMBED_THREADS",
    "DSH_MEMORY_EMBED_POOLING",
    "DSH_MEMORY_DEBUG",
)
INITIALIZE = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05",'
    b'"capabilities":{},"clientInfo":{"name":"test-cli","version":"1"}}}\n'
)

needs_server = pytest.mark.skipif(
    importlib.util.find_spec("dsh_memory_mcp.transports.mcp_server") is None
    or importlib.util.find_spec("dsh_memory_mcp.store.shared") is None,
    reason="dsh_memory_mcp.transports.mcp_server / store not written yet",
)
posix_signals = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
linux_log_dir = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="platformdirs uses XDG_STATE_HOME on Linux"
)


# ------------------------------------------------------------------------------------------------
# Fixtures and helpers
# ------------------------------------------------------------------------------------------------


@dataclass
class Sandbox:
    root: Path
    home: Path
    xdg: Path
    cwd: Path
    broken: Path
    markers: Path

    @property
    def store(self) -> Path:
        return self.root / "store"

    def env(self, *, broken_sdk: bool = False, **extra: str) -> dict[str, str]:
        env = subprocess_env(HOME=str(self.home), USERPROFILE=str(self.home), XDG_STATE_HOME=str(self.xdg))
        env["CLI_TEST_MARKERS"] = str(self.markers)
        if broken_sdk:
            env["PYTHONPATH"] = str(self.broken) + os.pathsep + env["PYTHONPATH"]
        for key, value in extra.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def tree(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*"))

    def log_files(self) -> list[Path]:
        return list(self.xdg.rglob("dsh-memory-mcp.log")) if self.xdg.exists() else []


BROKEN_PACKAGE = """\
import os, pathlib
_markers = os.environ.get("CLI_TEST_MARKERS")
if _markers:
    pathlib.Path(_markers, __name__).touch()
raise ImportError(__name__ + " is broken on purpose (test double)")
"""


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    box = Sandbox(
        root=tmp_path,
        home=tmp_path / "home",
        xdg=tmp_path / "xdg-state",
        cwd=tmp_path / "work",
        broken=tmp_path / "broken-sdk",
        markers=tmp_path / "markers",
    )
    for d in (box.home, box.cwd, box.markers):
        d.mkdir()
    # Packages that must never be imported by --help/--version/usage errors: each records that
    # it was imported, then fails the way a broken install does.
    for name in ("mcp", "numpy", "httpx"):
        (box.broken / name).mkdir(parents=True)
        (box.broken / name / "__init__.py").write_text(BROKEN_PACKAGE, encoding="utf-8")
    return box


@pytest.fixture(autouse=True)
def _restore_package_logger() -> Iterator[None]:
    """In-process `main()` configures the `dsh_memory_mcp` logger for a real process; undo it."""
    logger = logging.getLogger("dsh_memory_mcp")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    for handler in list(logger.handlers):
        if handler not in saved[0]:
            logger.removeHandler(handler)
            handler.close()
    logger.setLevel(saved[1])
    logger.propagate = saved[2]


def run_cli(
    args: list[str], env: dict[str, str], *, cwd: Path | None = None, stdin: str = "", script: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [PYTHON, *(script or ["-m", "dsh_memory_mcp"]), *args]
    return subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=str(cwd) if cwd else None,
        timeout=RUN_TIMEOUT,
    )


def err_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return result.stderr.splitlines()


def line_starting(result: subprocess.CompletedProcess[str], prefix: str) -> str:
    for line in err_lines(result):
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no stderr line starts with {prefix!r}:\n{result.stderr}")


# ------------------------------------------------------------------------------------------------
# --help / --version
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_prints_usage_with_the_version_first_and_exits_0_creating_nothing(sandbox, flag):
    before = sandbox.tree()
    nope = sandbox.root / "nope"
    result = run_cli([flag, "--store-dir", str(nope)], sandbox.env(), cwd=sandbox.cwd)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == FIRST_LINE
    assert result.stderr == ""
    assert not nope.exists()
    assert sandbox.tree() == before  # no store, no log dir, nothing in HOME


def test_help_documents_flags_environment_exit_codes_and_an_mcp_config(sandbox):
    text = run_cli(["--help"], sandbox.env()).stdout
    for word in ("--store-dir", "--store ", "--project", "--project-dir", "-h, --help", "-v, --version"):
        assert word in text
    for name in SPEC_ENV_VARS:
        assert name in text
    assert "~/.dsh-memory-store" in text and "8199" in text
    for code in ("  0  ", "  1  ", "  2  "):
        assert code in text
    assert '"mcpServers"' in text and '"command": "dsh-memory-mcp"' in text
    assert "dsh-memory-mcp.log" in text


@pytest.mark.parametrize("flag", ["-v", "--version"])
def test_version_prints_only_name_and_version_and_exits_0_creating_nothing(sandbox, flag):
    before = sandbox.tree()
    result = run_cli([flag, "--store-dir", str(sandbox.root / "nope")], sandbox.env(), cwd=sandbox.cwd)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"dsh-memory-mcp {__version__}\n", "")
    assert sandbox.tree() == before


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_work_with_a_broken_sdk_because_they_never_import_it(sandbox, flag):
    result = run_cli([flag], sandbox.env(broken_sdk=True))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"dsh-memory-mcp {__version__}")
    assert list(sandbox.markers.iterdir()) == []  # mcp, numpy, httpx never imported


# ------------------------------------------------------------------------------------------------
# Usage errors: exit 2, the word named, nothing touched, SDK not imported
# ------------------------------------------------------------------------------------------------

USAGE_ERRORS = [
    # (argv with DIR standing for a path in the sandbox, words stderr must name, suggested flag)
    (["--store_dir", "DIR"], ["--store_dir"], "--store-dir"),
    (["--storedir", "DIR"], ["--storedir"], "--store-dir"),
    (["--storeD", "DIR"], ["--storeD"], "--store-dir"),
    (["--project_dir", "DIR"], ["--project_dir"], "--project-dir"),
    (["--verison"], ["--verison"], "--version"),
    (["--frobnicate"], ["--frobnicate"], None),
    (["stray"], ["stray"], None),
    (["lsit"], ["lsit"], None),
    (["list", "extra"], ["extra"], None),
    (["list", "--limt", "3"], ["--limt"], "--limit"),
    (["search", "x", "--top-k"], ["--top-k"], None),
    (["get", "--json=yes"], ["--json=yes"], None),
    (["forget", "--id", "a", "--id", "b"], ["--id"], None),
    (["stats", "--help=x"], ["--help=x"], None),
    (["--store-dir", "DIR", "DIR2"], ["DIR2"], None),
    (["--store-dir"], ["--store-dir"], None),
    (["--project"], ["--project"], None),
    (["--store-dir", "--help"], ["--store-dir", "--help"], None),
    (["--project", "-v"], ["--project", "-v"], None),
    (["--store-dir="], ["--store-dir"], None),
    (["--store-dir", ""], ["--store-dir"], None),
    (["--help=yes"], ["--help=yes"], None),
    (["--store-dir", "DIR", "--store", "DIR2"], ["--store"], None),
]


@pytest.mark.parametrize(
    ("argv", "named", "suggestion"), USAGE_ERRORS, ids=[" ".join(a[0]) or "-" for a in USAGE_ERRORS]
)
def test_a_bad_command_line_exits_2_naming_the_word_and_touches_nothing(sandbox, argv, named, suggestion):
    paths = {"DIR": str(sandbox.root / "nope"), "DIR2": str(sandbox.root / "nope2")}
    argv = [paths.get(word, word) for word in argv]
    named = [paths.get(word, word) for word in named]
    before = sandbox.tree()
    result = run_cli(argv, sandbox.env(broken_sdk=True), cwd=sandbox.cwd)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    first = err_lines(result)[0]
    # The server's command line keeps the program prefix; a person's subcommand goes without.
    prefix = "" if any(word in cli.COMMANDS for word in argv) else P
    assert first.startswith(prefix + "❌ 参数错误:")
    for word in named:
        assert word in first
    assert HINT in result.stderr
    if suggestion is not None:
        assert f"你是不是想写 {suggestion}?" in result.stderr
    assert all(line.startswith(prefix) for line in err_lines(result))
    assert "Traceback" not in result.stderr
    assert sandbox.tree() == before  # no store, no log dir, no import marker


# ------------------------------------------------------------------------------------------------
# Settings on the start-up lines: flags in both forms, aliases, env fallbacks, relative paths.
# A broken SDK makes the process stop right after printing them (exit 1), which keeps these fast.
# ------------------------------------------------------------------------------------------------


def _started_lines(result) -> tuple[str, str, str]:
    return (
        line_starting(result, P + "store-dir = "),
        line_starting(result, P + "project = "),
        line_starting(result, P + "默认保存作用域 = "),
    )


_SOURCES = {"flag": "--project", "env": "DSH_MEMORY_PROJECT", "cwd": "工作目录"}


def _project_line(path: Path | str, source: str) -> str:
    return f"{P}project = {path}(project 作用域 = project:{path};来源:{_SOURCES[source]})"


@pytest.mark.parametrize(
    ("store_flag", "project_flag", "equals"),
    [("--store-dir", "--project", True), ("--store", "--project-dir", False), ("--store-dir", "--project-dir", False)],
)
def test_flags_work_as_key_value_and_key_equals_value_with_every_alias(sandbox, store_flag, project_flag, equals):
    store, project = sandbox.root / "s", sandbox.root / "p"
    if equals:
        argv = [f"{store_flag}={store}", f"{project_flag}={project}"]
    else:
        argv = [store_flag, str(store), project_flag, str(project)]
    result = run_cli(argv, sandbox.env(broken_sdk=True), cwd=sandbox.cwd)
    assert result.returncode == 1
    assert _started_lines(result) == (
        f"{P}store-dir = {store}",
        _project_line(project, "flag"),
        f"{P}默认保存作用域 = global",
    )
    assert "未指定 --store-dir" not in result.stderr


def test_relative_flag_paths_resolve_against_the_current_directory(sandbox):
    result = run_cli(["--store-dir", "rel/store", "--project=app"], sandbox.env(broken_sdk=True), cwd=sandbox.cwd)
    store, project, _ = _started_lines(result)
    assert store == f"{P}store-dir = {sandbox.cwd / 'rel' / 'store'}"
    assert project == _project_line(sandbox.cwd / "app", "flag")


def test_environment_variables_are_the_fallbacks_and_resolve_relative_paths(sandbox):
    env = sandbox.env(
        broken_sdk=True, DSH_MEMORY_STORE_DIR="env-store", DSH_MEMORY_PROJECT="env-app", DSH_MEMORY_SCOPE_ALL="yes"
    )
    result = run_cli([], env, cwd=sandbox.cwd)
    assert _started_lines(result) == (
        f"{P}store-dir = {sandbox.cwd / 'env-store'}",
        _project_line(sandbox.cwd / "env-app", "env"),
        f"{P}默认保存作用域 = project",
    )


def test_flags_win_over_environment_variables(sandbox):
    env = sandbox.env(
        broken_sdk=True, DSH_MEMORY_STORE_DIR=str(sandbox.root / "env"), DSH_MEMORY_PROJECT=str(sandbox.root / "envp")
    )
    result = run_cli(["--store-dir", str(sandbox.root / "flag"), "--project", str(sandbox.root / "flagp")], env)
    store, project, _ = _started_lines(result)
    assert store == f"{P}store-dir = {sandbox.root / 'flag'}"
    assert project == _project_line(sandbox.root / "flagp", "flag")


def test_the_project_defaults_to_the_current_directory(sandbox):
    result = run_cli([], sandbox.env(broken_sdk=True), cwd=sandbox.cwd)
    assert _started_lines(result)[1] == _project_line(sandbox.cwd, "cwd")


@linux_log_dir
def test_a_started_server_logs_to_a_file_in_the_user_log_dir(sandbox):
    result = run_cli(["--store-dir", str(sandbox.store)], sandbox.env(broken_sdk=True))
    assert result.returncode == 1
    [log_file] = sandbox.log_files()
    assert log_file.parent == sandbox.xdg / "dsh-memory-mcp" / "log"
    text = log_file.read_text(encoding="utf-8")
    assert f"store-dir = {sandbox.store}" in text and "启动失败" in text


@linux_log_dir
def test_the_log_file_is_created_0600_in_a_0700_dir_even_under_umask_000(sandbox):
    command = [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(sandbox.store)]
    env = sandbox.env(broken_sdk=True)
    result = subprocess.run(
        command, input="", capture_output=True, text=True, encoding="utf-8", env=env, timeout=RUN_TIMEOUT, umask=0
    )
    assert result.returncode == 1, result.stderr
    [log_file] = sandbox.log_files()
    assert oct(log_file.stat().st_mode & 0o777) == "0o600"
    assert oct(log_file.parent.stat().st_mode & 0o777) == "0o700"


@linux_log_dir
def test_a_readable_log_file_left_by_an_older_version_is_tightened_and_so_is_its_rotation(sandbox):
    log_dir = sandbox.xdg / "dsh-memory-mcp" / "log"
    log_dir.mkdir(parents=True)
    old = log_dir / "dsh-memory-mcp.log"
    old.write_bytes(b"x" * 1_000_100 + b"\n")  # over the 1 MB limit: the first record rotates it
    old.chmod(0o644)
    command = [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(sandbox.store)]
    env = sandbox.env(broken_sdk=True)
    result = subprocess.run(
        command, input="", capture_output=True, text=True, encoding="utf-8", env=env, timeout=RUN_TIMEOUT, umask=0
    )
    assert result.returncode == 1, result.stderr
    rotated = log_dir / "dsh-memory-mcp.log.1"
    assert rotated.stat().st_size > 1_000_000  # the old content moved there
    assert "store-dir = " in old.read_text(encoding="utf-8")
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in (old, rotated)} == {
        "dsh-memory-mcp.log": "0o600",
        "dsh-memory-mcp.log.1": "0o600",
    }


@linux_log_dir
def test_an_unusable_log_dir_is_warned_about_once_and_the_server_goes_on(sandbox):
    blocker = sandbox.root / "a-file"
    blocker.write_text("x", encoding="utf-8")
    env = sandbox.env(broken_sdk=True, XDG_STATE_HOME=str(blocker / "state"))
    result = run_cli(["--store-dir", str(sandbox.store)], env)
    assert result.returncode == 1  # it went on to the SDK import (broken here)
    assert result.stderr.count("无法创建日志目录") == 1
    assert line_starting(result, P + "store-dir = ")
    assert "pip install" in result.stderr


# ------------------------------------------------------------------------------------------------
# Start-up failures: exit 1, an actionable Chinese diagnostic, no bare traceback
# ------------------------------------------------------------------------------------------------


def test_a_missing_sdk_exits_1_naming_the_module_and_the_pip_command(sandbox):
    result = run_cli(["--store-dir", str(sandbox.store)], sandbox.env(broken_sdk=True))
    assert result.returncode == 1
    assert result.stdout == ""
    failure = line_starting(result, P + "❌ 启动失败:")
    assert "mcp" in failure
    assert 'pip install "mcp>=2.3,<2.4"' in result.stderr
    assert "pip install dsh-memory-mcp" in result.stderr
    assert line_starting(result, P + "原始错误:ImportError: mcp is broken on purpose")
    assert "Traceback" not in result.stderr
    assert not sandbox.store.exists()


def test_debug_adds_the_traceback_to_the_missing_sdk_diagnostic(sandbox):
    result = run_cli(["--store-dir", str(sandbox.store)], sandbox.env(broken_sdk=True, DSH_MEMORY_DEBUG="1"))
    assert result.returncode == 1
    assert 'pip install "mcp>=2.3,<2.4"' in result.stderr
    assert "Traceback (most recent call last)" in result.stderr


def _assert_store_diagnostic(result, path: Path, reason: str) -> None:
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert line_starting(result, P + "❌ 启动失败:记忆存储目录不可用:") == f"{P}❌ 启动失败:记忆存储目录不可用:{path}"
    assert reason in line_starting(result, P + "⇒ 原因:")
    fix = line_starting(
        result, P + "⇒ 改 --store-dir(或环境变量 DSH_MEMORY_STORE_DIR)指向一个已存在且可写的目录;默认是 "
    )
    assert fix.endswith(".dsh-memory-store")
    assert line_starting(result, P + "原始错误:")
    assert "Traceback" not in result.stderr


@needs_server
def test_a_store_dir_whose_parent_is_missing_is_a_start_up_failure(sandbox):
    store = sandbox.root / "missing" / "store"
    result = run_cli(["--store-dir", str(store)], sandbox.env())
    _assert_store_diagnostic(result, store, f"父目录不存在:{store.parent}")
    assert not store.parent.exists()


@needs_server
def test_a_store_dir_that_is_a_file_is_a_start_up_failure(sandbox):
    store = sandbox.root / "store-file"
    store.write_text("not a directory", encoding="utf-8")
    result = run_cli(["--store-dir", str(store)], sandbox.env())
    _assert_store_diagnostic(result, store, "是个文件")
    assert store.read_text(encoding="utf-8") == "not a directory"


def _unwritable_store(root: Path) -> Path:
    """A store path that cannot be created: under a read-only dir, or (as root, whom chmod does
    not stop) under /sys, where mkdir fails with EPERM (EROFS where sysfs is mounted read-only)."""
    if sys.platform == "win32":
        pytest.skip("no portable read-only directory on Windows")
    if os.geteuid() != 0:
        locked = root / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        return locked / "store"
    candidate = Path("/sys") / f"dsh-memory-mcp-test-{os.getpid()}"
    try:
        candidate.mkdir()
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES, errno.EROFS):
            return candidate
        pytest.skip(f"mkdir under /sys failed differently: {exc!r}")
    candidate.rmdir()
    pytest.skip("running as root and /sys is writable: no directory refuses root here")


@needs_server
def test_a_store_dir_that_cannot_be_written_is_a_start_up_failure(sandbox):
    store = _unwritable_store(sandbox.root)
    try:
        result = run_cli(["--store-dir", str(store)], sandbox.env())
    finally:
        if store.parent.parent == sandbox.root:
            store.parent.chmod(0o700)
    assert result.returncode == 1
    reason = line_starting(result, P + "⇒ 原因:")
    assert "没有写入权限" in reason or "只读" in reason
    _assert_store_diagnostic(result, store, "")
    assert not store.exists()


@needs_server
def test_debug_adds_the_traceback_to_a_store_diagnostic(sandbox):
    store = sandbox.root / "missing" / "store"
    result = run_cli(["--store-dir", str(store)], sandbox.env(DSH_MEMORY_DEBUG="1"))
    assert result.returncode == 1
    assert line_starting(result, P + "❌ 启动失败:记忆存储目录不可用:")
    assert "Traceback (most recent call last)" in result.stderr


# ------------------------------------------------------------------------------------------------
# A real start: the start-up lines, the default-store notice, clean exits
# ------------------------------------------------------------------------------------------------


@needs_server
def test_a_start_with_stdin_closed_prints_the_start_up_lines_and_exits_0(sandbox):
    result = run_cli(["--store-dir", str(sandbox.store), "--project", str(sandbox.cwd)], sandbox.env(), stdin="")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    lines = err_lines(result)
    assert lines[:3] == [
        f"{P}store-dir = {sandbox.store}",
        _project_line(sandbox.cwd, "flag"),
        f"{P}默认保存作用域 = global",
    ]
    assert f"{P}已启动 dsh-memory-mcp v{__version__}(stdio)" in lines
    assert "未指定 --store-dir" not in result.stderr
    assert sandbox.store.is_dir()


@needs_server
def test_the_default_store_is_announced_with_the_flag_and_variable_to_change_it(sandbox):
    env = sandbox.env(DSH_MEMORY_STORE_DIR=None)
    result = run_cli([], env, cwd=sandbox.cwd, stdin="")
    assert result.returncode == 0, result.stderr
    default = sandbox.home / ".dsh-memory-store"
    assert line_starting(result, P + "store-dir = ") == f"{P}store-dir = {default}"
    assert f"{P}ℹ️ 未指定 --store-dir / DSH_MEMORY_STORE_DIR,使用默认目录:{default}" in err_lines(result)
    assert line_starting(result, P + "⇒ 请确认它与 DSH 记忆插件的 storeDir 是同一个目录")
    assert default.is_dir()


def _start_and_wait_until_serving(
    command: list[str], env: dict[str, str], *, handshake: bool
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + RUN_TIMEOUT
    while "已启动".encode() not in seen:
        chunk = proc.stderr.read1(4096)
        assert chunk and time.monotonic() < deadline, f"server did not start: {seen.decode(errors='replace')}"
        seen += chunk
    if handshake:  # the event loop is running and its stdin reader is blocked in read()
        proc.stdin.write(INITIALIZE)
        proc.stdin.flush()
        assert b'"id":1' in proc.stdout.readline()
    return proc


def _stop(proc: subprocess.Popen[bytes], sig: int) -> tuple[int, float, str]:
    """Send `sig` once; (exit code, seconds until it exited, the rest of its stderr)."""
    started = time.monotonic()
    proc.send_signal(sig)
    try:
        code = proc.wait(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None and proc.stdin is not None and proc.stdout is not None
    rest = proc.stderr.read().decode("utf-8", "replace")
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()
    return code, time.monotonic() - started, rest


@needs_server
@posix_signals
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_a_running_server_with_exit_0_while_the_host_keeps_stdin_open(sandbox, sig):
    command = [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(sandbox.store)]
    proc = _start_and_wait_until_serving(command, sandbox.env(), handshake=True)
    code, elapsed, rest = _stop(proc, sig)
    assert code == 0, rest
    assert elapsed < 5, f"took {elapsed:.1f}s: {rest}"
    assert "收到退出信号" in rest and "Traceback" not in rest


@posix_signals
def test_a_server_that_does_not_read_stdin_is_still_stopped_by_sigterm_via_keyboardinterrupt(sandbox):
    command = [PYTHON, str(FAKE_SERVER), "ignore-stdin", "--store-dir", str(sandbox.store)]
    proc = _start_and_wait_until_serving(command, sandbox.env(), handshake=False)
    code, elapsed, rest = _stop(proc, signal.SIGTERM)
    assert code == 0, rest
    assert elapsed < 5
    assert "收到退出信号" in rest and "Traceback" not in rest


@posix_signals
def test_a_second_signal_interrupts_a_slow_shutdown_at_once(sandbox):
    # The first SIGINT starts a cleanup that would take 30 s (and the hard deadline is 60 s): only the
    # second signal can end the process within seconds.
    command = [PYTHON, str(FAKE_SERVER), "slow-cleanup", "--store-dir", str(sandbox.store)]
    proc = _start_and_wait_until_serving(command, sandbox.env(), handshake=False)
    assert proc.stderr is not None
    proc.send_signal(signal.SIGINT)
    seen = b""
    deadline = time.monotonic() + RUN_TIMEOUT
    while b"cleanup started" not in seen:
        chunk = proc.stderr.read1(4096)
        assert chunk and time.monotonic() < deadline, seen.decode(errors="replace")
        seen += chunk
    code, elapsed, rest = _stop(proc, signal.SIGINT)
    assert code == 0, rest
    assert elapsed < 10, f"the second signal took {elapsed:.1f} s to end a 30 s cleanup"
    assert "Traceback" not in rest and "强制退出" not in rest


@posix_signals
def test_a_shutdown_that_hangs_after_a_signal_is_ended_by_the_hard_deadline(sandbox):
    command = [PYTHON, str(FAKE_SERVER), "stuck", "--store-dir", str(sandbox.store)]
    proc = _start_and_wait_until_serving(command, sandbox.env(), handshake=False)
    code, elapsed, rest = _stop(proc, signal.SIGTERM)
    assert code == 0, rest
    assert elapsed < 5
    assert "强制退出" in rest


def test_a_thread_left_behind_by_the_server_does_not_keep_the_process_alive(sandbox):
    started = time.monotonic()
    result = run_cli(["--store-dir", str(sandbox.store)], sandbox.env(), script=[str(FAKE_SERVER), "leave-thread"])
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 10


# ------------------------------------------------------------------------------------------------
# The parser as plain function calls
# ------------------------------------------------------------------------------------------------


def test_an_empty_command_line_means_run_the_server_with_nothing_given():
    assert cli.parse_args([]) == cli.Invocation()


def test_both_value_forms_and_all_aliases_parse_to_the_same_settings():
    expected = cli.Invocation(store_dir="/s", project_dir="/p")
    assert cli.parse_args(["--store-dir", "/s", "--project", "/p"]) == expected
    assert cli.parse_args(["--store=/s", "--project-dir=/p"]) == expected
    assert cli.parse_args(["--project-dir", "/p", "--store", "/s"]) == expected


def test_a_value_starting_with_a_dash_is_accepted_only_in_the_equals_form():
    assert cli.parse_args(["--store-dir=-odd"]).store_dir == "-odd"
    with pytest.raises(cli.UsageError) as info:
        cli.parse_args(["--store-dir", "-odd"])
    assert info.value.word == "--store-dir" and "-odd" in info.value.message


def test_help_and_version_flags_parse_and_combine_with_others():
    assert cli.parse_args(["-h"]).help and cli.parse_args(["--help"]).help
    assert cli.parse_args(["-v"]).version and cli.parse_args(["--version"]).version
    assert cli.parse_args(["--store-dir", "x", "--help"]) == cli.Invocation(store_dir="x", help=True)


@pytest.mark.parametrize(
    ("argv", "word"),
    [
        (["--store_dir", "x"], "--store_dir"),
        (["--storedir=x"], "--storedir=x"),
        (["-s", "x"], "-s"),
        (["-hv"], "-hv"),
        (["--", "x"], "x"),
        (["-"], "-"),
        (["x"], "x"),
        (["--store-dir"], "--store-dir"),
        (["--store-dir", "   "], "--store-dir"),
        (["--project=", "x"], "--project"),
        (["--version=2"], "--version=2"),
        (["-h", "-h"], "-h"),
    ],
)
def test_the_parser_rejects_what_it_cannot_run_and_names_the_word(argv, word):
    with pytest.raises(cli.UsageError) as info:
        cli.parse_args(argv)
    assert info.value.word == word
    assert word.strip() in info.value.message


@pytest.mark.parametrize(
    ("word", "suggestion"),
    [
        ("--store_dir", "--store-dir"),
        ("--storedir", "--store-dir"),
        ("--storeD", "--store-dir"),
        ("--STORE-DIR", "--store-dir"),
        ("-store-dir", "--store-dir"),
        ("--project_dir=x", "--project-dir"),
        ("--projet", "--project"),
        ("-V", "-v"),
        ("--hlep", "--help"),
        ("--zzzzzz", None),
        ("--", None),
    ],
)
def test_near_misses_get_the_right_flag_suggested(word, suggestion):
    assert parser.suggest_option(word) == suggestion


def test_the_first_positional_word_selects_a_registered_subcommand(monkeypatch):
    calls = []
    command = cli.Command("doctor", "check the install", run=lambda inv: calls.append(inv) or 7, accepts_args=True)
    monkeypatch.setitem(cli.COMMANDS, "doctor", command)
    invocation = cli.parse_args(["doctor", "--store-dir", "/s", "extra"])
    assert invocation == cli.Invocation(command="doctor", store_dir="/s", args=("extra",))
    assert cli.main(["doctor"]) == 7 and calls[0].command == "doctor"
    with pytest.raises(cli.UsageError):
        cli.parse_args(["--store-dir", "/s", "nope"])


def test_a_subcommands_own_options_reach_it_by_dest_with_aliases_and_both_forms():
    invocation = cli.parse_args(["search", "docker", "images", "--topk=3", "--scope", "global", "--json"])
    assert invocation == cli.Invocation(
        command="search", args=("docker", "images"), options={"top_k": "3", "scope": "global", "json": True}
    )
    assert cli.parse_args(["import", "-", "--store-dir", "/s"]).args == ("-",)
    assert cli.parse_args(["forget", "--query=-odd"]).options == {"query": "-odd"}
    with pytest.raises(cli.UsageError) as info:
        cli.parse_args(["list", "--top-k", "3"])  # another command's option
    assert info.value.word == "--top-k"
    with pytest.raises(cli.UsageError) as info:
        cli.parse_args(["--json"])  # no subcommand, no subcommand options
    assert info.value.word == "--json"


def test_every_subcommand_is_listed_in_the_main_help_and_has_its_own(capsys):
    assert cli.main(["--help"]) == 0
    main_help = capsys.readouterr().out
    for name in ("list", "search", "get", "forget", "export", "import", "stats", "reembed", "doctor"):
        assert f"\n  {name} " in main_help
        assert cli.main([name, "--help"]) == 0
        out, err = capsys.readouterr()
        assert out.startswith(f"dsh-memory-mcp {name} — ") and err == ""
        assert f"dsh-memory-mcp {name}" in out.splitlines()[3]
        for option in cli.COMMANDS[name].extra_options:
            assert option.names[0] in out


def test_help_and_version_in_process_write_only_to_stdout(capsys):
    assert cli.main(["--help"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == FIRST_LINE and err == ""
    assert cli.main(["-v"]) == 0
    assert capsys.readouterr() == (f"dsh-memory-mcp {__version__}\n", "")


def test_a_usage_error_in_process_returns_2_with_the_hint_on_stderr(capsys):
    assert cli.main(["--store_dir", "x"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"{P}❌ 参数错误:未知参数 --store_dir",
        f"{P}⇒ 你是不是想写 --store-dir?",
        f"{P}⇒ {HINT}",
    ]


# ------------------------------------------------------------------------------------------------
# Start-up diagnostics with a stand-in serve (in process)
# ------------------------------------------------------------------------------------------------


def _raising(exc: BaseException):
    def serve(settings):
        raise exc

    return serve


def test_serve_gets_the_resolved_settings_and_a_normal_return_is_exit_0(tmp_path, capsys):
    seen = []
    code = cli.main(["--store-dir", str(tmp_path / "s"), "--project", str(tmp_path / "p")], serve=seen.append)
    assert code == 0
    assert seen[0].store_dir == str(tmp_path / "s") and seen[0].project_dir == str(tmp_path / "p")
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[:3] == [
        f"{P}store-dir = {tmp_path / 's'}",
        _project_line(tmp_path / "p", "flag"),
        f"{P}默认保存作用域 = global",
    ]


def test_a_store_error_becomes_the_four_line_diagnostic(tmp_path, capsys):
    store = tmp_path / "gone" / "store"
    cause = FileNotFoundError(errno.ENOENT, "No such file or directory", str(store))
    error = errors.StoreError(f"记忆库目录不可用:{store} 的上级目录不存在", path=str(store))
    error.__cause__ = cause
    assert cli.main(["--store-dir", str(store)], serve=_raising(error)) == 1
    lines = capsys.readouterr().err.splitlines()[3:]
    assert lines[0] == f"{P}❌ 启动失败:记忆存储目录不可用:{store}"
    assert lines[1] == f"{P}⇒ 原因:父目录不存在:{store.parent}"
    assert lines[2].startswith(
        f"{P}⇒ 改 --store-dir(或环境变量 DSH_MEMORY_STORE_DIR)指向一个已存在且可写的目录;默认是 "
    )
    assert lines[3] == f"{P}原始错误:FileNotFoundError: [Errno 2] No such file or directory: '{store}'"
    assert len(lines) == 4


def test_the_store_errors_own_reason_is_used_when_the_filesystem_shows_nothing(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    error = errors.StoreError("scope 文件 projects 损坏", path=str(store))
    assert cli.main(["--store-dir", str(store)], serve=_raising(error)) == 1
    err = capsys.readouterr().err
    assert f"{P}⇒ 原因:scope 文件 projects 损坏" in err.splitlines()
    assert f"{P}原始错误:StoreError: scope 文件 projects 损坏" in err.splitlines()


def test_a_plain_permission_error_on_the_store_is_explained_as_not_writable(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    error = PermissionError(errno.EACCES, "Permission denied", str(store / "global.jsonl"))
    assert cli.main(["--store-dir", str(store)], serve=_raising(error)) == 1
    err = capsys.readouterr().err
    assert f"{P}❌ 启动失败:记忆存储目录不可用:{store / 'global.jsonl'}" in err.splitlines()
    assert "⇒ 原因:没有写入权限" in err


def test_debug_adds_the_traceback_in_process(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DSH_MEMORY_DEBUG", "1")
    error = errors.StoreError("坏了", path=str(tmp_path / "x" / "y"))
    assert cli.main([], serve=_raising(error)) == 1
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_an_unexpected_error_at_start_is_one_line_without_traceback(capsys):
    assert cli.main([], serve=_raising(RuntimeError("boom"))) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == f"{P}❌ 启动失败:意外错误 RuntimeError: boom(设 DSH_MEMORY_DEBUG=1 可看完整调用栈)"
    assert not any("Traceback" in line for line in err)


def test_a_crash_after_the_server_announced_itself_is_not_called_a_start_up_failure(capsys):
    def serve(settings):
        logging.getLogger("dsh_memory_mcp.transports.mcp_server").info("已启动 dsh-memory-mcp v%s(stdio)", __version__)
        raise ValueError("later")

    assert cli.main([], serve=serve) == 1
    assert capsys.readouterr().err.splitlines()[-1].startswith(f"{P}❌ 服务异常退出:意外错误 ValueError: later")


def test_an_os_error_unrelated_to_the_store_is_not_blamed_on_the_store(tmp_path, capsys):
    error = FileNotFoundError(errno.ENOENT, "No such file or directory", "/elsewhere/llama-server")
    assert cli.main(["--store-dir", str(tmp_path / "s")], serve=_raising(error)) == 1
    err = capsys.readouterr().err
    assert "记忆存储目录不可用" not in err and "意外错误 FileNotFoundError" in err


def test_keyboard_interrupt_from_serve_is_a_clean_exit_0(capsys):
    assert cli.main([], serve=_raising(KeyboardInterrupt())) == 0
    assert "收到退出信号" in capsys.readouterr().err


def test_signal_handlers_are_restored_after_an_in_process_run():
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    assert cli.main([], serve=lambda settings: None) == 0
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_an_inherited_sigint_ignore_is_kept_while_serving_and_sigterm_still_stops():
    # A parent that starts the server with SIGINT ignored (a non-interactive shell's `&`, a host
    # shielding its children from the terminal's Ctrl+C) asked for it: the server keeps ignoring it.
    seen: list[object] = []
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert (
            cli.main(
                [],
                serve=lambda settings: seen.append((signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))),
            )
            == 0
        )
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)
    [(sigint, sigterm)] = seen
    assert sigint is signal.SIG_IGN
    assert callable(sigterm) and sigterm is not signal.default_int_handler


def test_a_store_error_inside_an_exception_group_still_gets_the_store_diagnostic(tmp_path, capsys):
    store = tmp_path / "file"
    store.write_text("x", encoding="utf-8")
    group = ExceptionGroup("task group", [errors.StoreError("", path=str(store))])
    assert cli.main(["--store-dir", str(store)], serve=_raising(group)) == 1
    err = capsys.readouterr().err
    assert f"{P}❌ 启动失败:记忆存储目录不可用:{store}" in err.splitlines()
    assert "是个文件" in err


@pytest.mark.parametrize(
    ("layout", "path", "error_errno", "expected"),
    [
        ("nothing", "a/b/store", None, "父目录不存在"),
        ("file", "f", None, "是个文件,不是目录"),
        ("file", "f/store", None, "路径中的"),
        ("dir", "d", errno.EACCES, "没有写入权限"),
        ("dir", "d", errno.EROFS, "只读"),
        ("dir", "d", errno.ENOSPC, "磁盘空间"),
        ("dir", "d", None, None),
    ],
)
def test_explain_store_problem_names_the_cause_from_the_filesystem_and_errno(
    tmp_path, layout, path, error_errno, expected
):
    if layout == "file":
        (tmp_path / "f").write_text("x", encoding="utf-8")
    elif layout == "dir":
        (tmp_path / "d").mkdir()
    error = OSError(error_errno, os.strerror(error_errno)) if error_errno else None
    reason = cli.explain_store_problem(str(tmp_path / path), error)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason
