"""The ecosystem scripts run for real: the acceptance scripts.

Every script runs as a subprocess (`python scripts/<name>.py`), exactly as the README tells a user to
run it, against temp stores only, with a timeout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
TOOLS = ("memory_save", "memory_search", "memory_list", "memory_get", "memory_forget")

SEEDED = (
    '{"id":"0b5f3c1e-9a7d-4e2b-8c61-2f4a9d7e1b30","scope":"global","kind":"preference",'
    '"content":"用户偏好深色主题与等宽字体","tags":["ui"],"source":{"origin":"explicit"},'
    '"createdAt":1792403053326,"updatedAt":1792403053326,"lastAccessedAt":1792403053326,'
    '"accessCount":2,"importance":0.8,"dshOnlyField":{"keep":true}}'
)


def run_script(name: str, *args: str, timeout: float = 90, env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        env=env if env is not None else subprocess_env(),
        cwd=str(cwd) if cwd else str(ROOT),
    )


# --------------------------------------------------------------------------------------------
# acceptance_real.py
# --------------------------------------------------------------------------------------------


def test_acceptance_real_without_its_variable_says_so_in_one_line_and_exits_0():
    proc = run_script("acceptance_real.py", timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.strip().splitlines()) == 1
    assert "DSH_MEMORY_REAL_STORE" in proc.stdout


def test_acceptance_real_refuses_a_store_that_does_not_exist(tmp_path):
    missing = tmp_path / "no-store"
    proc = run_script("acceptance_real.py", env=subprocess_env(DSH_MEMORY_REAL_STORE=str(missing)), timeout=30)
    assert proc.returncode == 1
    assert not missing.exists()


@pytest.mark.slow
def test_acceptance_real_leaves_a_seeded_store_exactly_as_it_was(tmp_path):
    store = tmp_path / "real-store"
    store.mkdir()
    seeded = (SEEDED + "\n").encode("utf-8")
    (store / "global.jsonl").write_bytes(seeded)

    proc = run_script("acceptance_real.py", env=subprocess_env(DSH_MEMORY_REAL_STORE=str(store)), timeout=120)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "✗" not in proc.stdout
    assert "既有记忆仍能读取" in proc.stdout and "project 作用域" in proc.stdout
    assert (store / "global.jsonl").read_bytes() == seeded
    for path in store.rglob("*"):
        # The write journal keeps the run's forget (so it is never restored) and its scope keys
        # (a temp dir named dsh-acceptance-real-…), but not the text of what was forgotten.
        if path.is_file():
            marker = b"[dsh-acceptance-" if ".journal" in path.parts else b"dsh-acceptance-"
            assert marker not in path.read_bytes(), path
    assert not list(store.glob("projects/*.jsonl"))  # the scope file it created is gone again


# --------------------------------------------------------------------------------------------
# acceptance_standalone.py / acceptance_coexist.py
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_acceptance_standalone_passes_with_vectors_off():
    proc = run_script("acceptance_standalone.py", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "冷启动成功" in proc.stdout and "spawn → initialize" in proc.stdout
    assert "跳过 向量后端" in proc.stdout
    assert "✗" not in proc.stdout


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="the llama-server stand-in is a POSIX shell script")
def test_acceptance_standalone_spawns_a_backend_and_leaves_no_orphan(tmp_path):
    from tests.helpers.fake_llama_exe import make_stand_in

    exe = make_stand_in(tmp_path / "bin")
    model = tmp_path / "all-MiniLM-L6-v2-f16.gguf"
    model.write_bytes(b"GGUF")
    port = _free_port()
    env = subprocess_env(
        DSH_MEMORY_EMBED_EXE=str(exe),
        DSH_MEMORY_EMBED_MODEL=str(model),
        DSH_MEMORY_EMBED_PORT=str(port),
        FAKE_LLAMA_ARGV_FILE=str(tmp_path / "argv.jsonl"),
    )
    env.pop("DSH_MEMORY_VECTOR", None)

    proc = run_script("acceptance_standalone.py", env=env, timeout=150)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"MCP 自己拉起了 llama-server({port})" in proc.stdout
    assert "语义相近但措辞不同也能召回" in proc.stdout
    assert "无孤儿进程" in proc.stdout
    assert "✗" not in proc.stdout


@pytest.mark.slow
def test_acceptance_standalone_reuses_an_endpoint_and_leaves_it_running():
    from tests.helpers.fake_llama import FakeLlama

    with FakeLlama() as fake:
        env = subprocess_env(DSH_MEMORY_EMBED_ENDPOINT=fake.url)
        env.pop("DSH_MEMORY_VECTOR", None)

        proc = run_script("acceptance_standalone.py", env=env, timeout=150)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "语义相近但措辞不同也能召回" in proc.stdout
    assert "复用的后端在服务退出后仍在运行" in proc.stdout
    assert "✗" not in proc.stdout


@pytest.mark.slow
def test_acceptance_coexist_measures_and_exits_0():
    proc = run_script("acceptance_coexist.py", "--rounds", "1", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "✓ 对照轮" in proc.stdout and "→ 磁盘 24 条" in proc.stdout
    assert "加锁写者 写入 24 条 → 磁盘剩" in proc.stdout and "无锁写者 写入 12 条 → 磁盘剩" in proc.stdout


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
