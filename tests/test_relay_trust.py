"""Which `serve.json` the relay trusts: only a regular file of ours, not writable by others, naming a live pid."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.transports.relay import ServeInfo, find_serve, read_serve_file


def _write(store: Path, data: object, mode: int = 0o600) -> Path:
    store.mkdir(parents=True, exist_ok=True)
    path = store / "serve.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    os.chmod(path, mode)
    return path


def _info(pid: int | None = None, url: str = "http://127.0.0.1:7766/mcp") -> dict[str, object]:
    return {"url": url, "pid": os.getpid() if pid is None else pid, "token": "t0k", "version": "0.1.0", "startedAt": 1}


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_no_serve_file_means_direct(tmp_path: Path):
    info, why = read_serve_file(str(tmp_path))
    assert info is None and "没有运行中的 serve" in why


def test_a_serve_file_of_ours_naming_a_live_pid_is_trusted(tmp_path: Path):
    _write(tmp_path, _info())
    info, why = read_serve_file(str(tmp_path))
    assert why == ""
    assert info == ServeInfo(
        url="http://127.0.0.1:7766/mcp", token="t0k", pid=os.getpid(), version="0.1.0", started_at=1
    )


def test_a_dead_pid_is_not_trusted(tmp_path: Path):
    pid = _dead_pid()
    _write(tmp_path, _info(pid=pid))
    info, why = read_serve_file(str(tmp_path))
    assert info is None and str(pid) in why


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_a_serve_file_others_can_write_is_not_trusted(tmp_path: Path, mode: int):
    _write(tmp_path, _info(), mode=mode)
    info, why = read_serve_file(str(tmp_path))
    assert info is None and "可写" in why


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="needs root to chown to another user")
def test_a_serve_file_owned_by_another_user_is_not_trusted(tmp_path: Path):
    path = _write(tmp_path, _info())
    os.chown(path, 65534, 65534)
    info, why = read_serve_file(str(tmp_path))
    assert info is None and "属于另一个用户" in why


def test_a_symlinked_serve_file_is_not_followed(tmp_path: Path):
    real = _write(tmp_path / "elsewhere", _info())
    (tmp_path / "store").mkdir()
    os.symlink(real, tmp_path / "store" / "serve.json")
    info, why = read_serve_file(str(tmp_path / "store"))
    assert info is None and "读不了" in why


def test_a_fifo_as_serve_file_does_not_block(tmp_path: Path):
    tmp_path.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "serve.json", 0o600)
    info, why = read_serve_file(str(tmp_path))
    assert info is None and "不是普通文件" in why


@pytest.mark.parametrize(
    "content",
    [
        "",
        "{",
        "[]",
        json.dumps({"url": "http://127.0.0.1:1/mcp", "pid": "12", "token": "x"}),
        json.dumps({"url": "file:///etc/passwd", "pid": 1, "token": "x"}),
        json.dumps({"url": "http://127.0.0.1:1/mcp", "pid": 1, "token": ""}),
    ],
)
def test_a_garbled_serve_file_is_not_trusted(tmp_path: Path, content: str):
    _write(tmp_path, content)
    info, why = read_serve_file(str(tmp_path))
    assert info is None and ("无法解析" in why or "不是 http" in why)


def test_a_serve_file_whose_port_nothing_listens_on_means_direct_and_says_why(tmp_path: Path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _write(tmp_path, _info(url=f"http://127.0.0.1:{port}/mcp"))
    found, why = find_serve(str(tmp_path))
    assert found is None and "无应答" in why


# --------------------------------------------------------------------------------------------
# serve.json naming a live pid: only a serve that answers as that pid owns the store


def _backdate(path: Path, seconds: float = 60.0) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def _end(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait(10)
    if proc.stdin is not None:
        proc.stdin.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_starts_over_a_serve_json_whose_live_pid_is_not_a_serve(tmp_path: Path):
    from tests.helpers.serve_proc import running_serve

    store = tmp_path / "store"
    bystander = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        path = _write(store, _info(pid=bystander.pid, url=f"http://127.0.0.1:{_free_port()}/mcp"))
        _backdate(path)
        with running_serve(store, tmp_path / "serve.log") as serve:
            assert json.loads(path.read_text(encoding="utf-8"))["pid"] == serve.proc.pid
            log = serve.stderr()
        assert f"已替换遗留的 serve.json(pid {bystander.pid} 的进程还在" in log, log
        assert bystander.poll() is None  # nobody touched the unrelated process
    finally:
        _end(bystander)


def test_a_fresh_serve_json_of_a_live_pid_is_a_serve_starting_up_and_keeps_the_store(tmp_path: Path):
    from dsh_memory_mcp.transports import serve_file

    starting = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        path = _write(tmp_path, _info(pid=starting.pid, url=f"http://127.0.0.1:{_free_port()}/mcp"))
        mine = ServeInfo(url="http://127.0.0.1:1/mcp", pid=os.getpid(), token="mine", version="", started_at=0)
        claimed = serve_file.claim(str(tmp_path), mine)
        assert not claimed.ok and claimed.other is not None and claimed.other.pid == starting.pid
        assert serve_file.owner(str(tmp_path)) is not None
        _backdate(path, serve_file.CLAIM_GRACE_SECS + 5)  # it never came up: its claim has lapsed
        assert serve_file.owner(str(tmp_path)) is None
        claimed = serve_file.claim(str(tmp_path), mine)
        assert claimed.ok and claimed.replaced_stale is not None and claimed.replaced_stale.pid == starting.pid
        assert "/health" in claimed.replaced_why
        assert json.loads(path.read_text(encoding="utf-8"))["token"] == "mine"
    finally:
        _end(starting)


def test_a_serve_that_answers_keeps_its_store_however_old_its_file(tmp_path: Path):
    from tests.helpers.serve_proc import running_serve, spawn_serve

    store = tmp_path / "store"
    with running_serve(store, tmp_path / "serve.log") as serve:
        _backdate(store / "serve.json", 3600)
        second = spawn_serve(store, tmp_path / "second.log")
        assert second.wait(60) == 1
        said = (tmp_path / "second.log").read_text(encoding="utf-8")
        assert f"pid {serve.proc.pid}" in said and "正在应答" in said, said
        assert json.loads((store / "serve.json").read_text(encoding="utf-8"))["pid"] == serve.proc.pid
