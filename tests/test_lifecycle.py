"""The llama-server lifecycle with a stand-in executable: spawn, reuse, stop, and no orphans."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from dsh_memory_mcp.config import VectorSettings
from dsh_memory_mcp.errors import EmbeddingUnavailable
from dsh_memory_mcp.search.backend import Backend
from dsh_memory_mcp.search.embedding import LOG_FILE_NAME, LlamaServerManager
from dsh_memory_mcp.search.vectors import VectorChannel
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import SRC
from tests.helpers.fake_llama import FakeLlama, free_port, not_llama
from tests.helpers.fake_llama_exe import kill_quietly, make_stand_in, pid_alive, read_spawns, wait_gone

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the stand-in executable is a POSIX shell script")

QUERY = "container release workflow"
TARGET = "the deploy pipeline pushes images"


@pytest.fixture
def argv_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "spawns.jsonl"
    monkeypatch.setenv("FAKE_LLAMA_ARGV_FILE", str(path))  # inherited by the spawned stand-in
    monkeypatch.setenv("FAKE_LLAMA_LOADING_S", "0.3")
    return path


@pytest.fixture
def settings(tmp_path: Path, argv_file: Path) -> VectorSettings:
    model = tmp_path / "models" / "All-MiniLM-L6-v2-Q8_0.gguf"
    model.parent.mkdir()
    model.write_bytes(b"GGUF")
    return VectorSettings(
        exe=str(make_stand_in(tmp_path / "bin")),
        model=str(model),
        port=free_port(),
        threads=3,
        pooling="mean",
        model_id="all-minilm-l6-v2",
    )


@contextmanager
def channel(settings: VectorSettings, store: SharedStore) -> Iterator[VectorChannel]:
    ch = VectorChannel(settings, store, load_timeout=20)
    store.on_delete = ch.on_delete
    ch.start()
    pid = None
    try:
        yield ch
        pid = ch.spawned_pid
    finally:
        pid = pid or ch.spawned_pid
        ch.close()
        kill_quietly(pid if pid and pid_alive(pid) else None)


@contextmanager
def stand_in_process(settings: VectorSettings) -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in started by the test itself, i.e. not by the code under test."""
    proc = subprocess.Popen(
        [settings.exe, "-m", str(settings.model), "--embedding", "--port", str(settings.port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{settings.port}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def test_nobody_on_the_port_means_one_spawn_with_the_right_flags(
    settings: VectorSettings, store: SharedStore, argv_file: Path
) -> None:
    with channel(settings, store) as ch:
        assert ch.wait_ready(20), ch.status
        pid = ch.spawned_pid
        assert pid is not None and pid_alive(pid)
        assert f"pid={pid}" in ch.status
        ch.record_saved("global", store.save("global", TARGET).record)
        assert ch.wait_idle(5)
        assert ch.query_scores(QUERY, [store.snapshot("global")])
    spawns = read_spawns(argv_file)
    assert len(spawns) == 1
    assert spawns[0]["pid"] == pid
    assert spawns[0]["argv"] == [
        "-m",
        settings.model,
        "--embedding",
        "--pooling",
        "mean",
        "--host",
        "127.0.0.1",
        "--port",
        str(settings.port),
        "-t",
        "3",
    ]
    log = (Path(store.root) / LOG_FILE_NAME).read_text(encoding="utf-8")
    assert "spawn:" in log and "fake llama-server listening" in log  # the child's stderr went to the log
    assert wait_gone(pid, 5), "our llama-server must stop when we close"


def test_an_unknown_model_family_passes_no_pooling_flag(
    settings: VectorSettings, argv_file: Path, tmp_path: Path
) -> None:
    from dataclasses import replace

    manager = LlamaServerManager(replace(settings, pooling=None), log_path=str(tmp_path / "l.log"), load_timeout=20)
    try:
        assert manager.ensure() == "spawned"
        assert manager.ensure() == "spawned"  # already ours and ready: not spawned twice
    finally:
        manager.close()
    (spawn,) = read_spawns(argv_file)
    assert "--pooling" not in spawn["argv"]
    assert wait_gone(spawn["pid"], 5)


def test_a_running_llama_server_is_reused_and_never_stopped(
    settings: VectorSettings, store: SharedStore, argv_file: Path
) -> None:
    with stand_in_process(settings) as theirs:
        with channel(settings, store) as ch:
            assert ch.wait_ready(20), ch.status
            assert ch.spawned_pid is None
            assert "复用" in ch.status
            ch.record_saved("global", store.save("global", TARGET).record)
            assert ch.wait_idle(5)
            assert ch.query_scores(QUERY, [store.snapshot("global")])
        assert theirs.poll() is None, "a reused llama-server must survive our exit"
        assert [s["pid"] for s in read_spawns(argv_file)] == [theirs.pid]  # nothing spawned by us


def test_a_port_held_by_another_program_is_a_clear_error_and_search_stays_lexical(
    settings: VectorSettings, store: SharedStore, argv_file: Path
) -> None:
    with not_llama(settings.port), channel(settings, store) as ch:
        deadline = time.monotonic() + 5
        while "不可用" not in ch.status and time.monotonic() < deadline:
            time.sleep(0.02)
        assert f"端口 {settings.port}" in ch.status and "DSH_MEMORY_EMBED_PORT" in ch.status
        store.save("global", TARGET)
        t0 = time.monotonic()
        assert ch.query_scores(QUERY, [store.snapshot("global")]) == {}
        assert time.monotonic() - t0 < 0.25  # no 300 ms wait for a backend that is not there
    assert read_spawns(argv_file) == []


@pytest.mark.parametrize("broken", ["exe", "model"])
def test_a_missing_binary_or_model_is_reported_not_raised(
    settings: VectorSettings, store: SharedStore, tmp_path: Path, broken: str
) -> None:
    from dataclasses import replace

    if broken == "exe":
        settings = replace(settings, exe=str(tmp_path / "nowhere" / "llama-server"))
        needle = "DSH_MEMORY_EMBED_EXE"
    else:
        settings = replace(settings, model=str(tmp_path / "missing.gguf"))
        needle = "模型文件不存在"
    with channel(settings, store) as ch:
        deadline = time.monotonic() + 5
        while "不可用" not in ch.status and time.monotonic() < deadline:
            time.sleep(0.02)
        assert needle in ch.status
        assert ch.query_scores(QUERY, []) == {}


def test_two_instances_racing_for_the_port_end_up_sharing_one_server(
    settings: VectorSettings, argv_file: Path, store: SharedStore
) -> None:
    # Two instances on one store, each with its own store object and backend, built exactly as the
    # server builds them (`Backend.setup`): the managers share the spawn lock
    # `<store>/.vectors/llama-server-<port>.lock`, so one probes, spawns and waits for ready while
    # the other waits for the lock, then finds the first one's server answering.
    stores = [SharedStore(store.root) for _ in range(2)]
    stops = [threading.Event() for _ in range(2)]
    backends = [
        Backend(
            settings,
            store=s,
            log=logging.getLogger("test.lifecycle"),
            stop=stop,
            wake=threading.Event(),
            on_new_space=lambda: None,
            load_timeout=20,
        )
        for s, stop in zip(stores, stops, strict=True)
    ]
    for b in backends:
        b.setup()
    managers = [b.manager for b in backends]
    assert all(m is not None for m in managers)
    lock_path = Path(store.root) / ".vectors" / f"llama-server-{settings.port}.lock"
    assert {m.spawn_lock_path for m in managers if m is not None} == {str(lock_path)}
    results: list[str | Exception] = []
    done = threading.Event()

    def run(b: Backend, stop: threading.Event) -> None:
        assert b.manager is not None
        try:
            results.append(b.manager.ensure(stop))
        except EmbeddingUnavailable as exc:
            results.append(exc)
        # The spawning thread must outlive its child: PR_SET_PDEATHSIG fires when *it* exits.
        done.wait(30)

    threads = [threading.Thread(target=run, args=pair) for pair in zip(backends, stops, strict=True)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(results) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sorted(map(str, results)) == ["reused", "spawned"]
        alive = [m.pid for m in managers if m is not None and m.pid is not None]
        assert len(alive) == 1  # one server, and the other instance reuses it
        assert len(read_spawns(argv_file)) == 1  # the lock means the loser never even tried to spawn
    finally:
        for stop in stops:
            stop.set()
        for b in backends:
            b.close()
        done.set()
        for t in threads:
            t.join(30)
        for s in stores:
            s.close()
    assert all(wait_gone(s["pid"], 5) for s in read_spawns(argv_file))


def test_a_reused_backend_that_goes_away_is_replaced_by_one_we_spawn(
    settings: VectorSettings, store: SharedStore, argv_file: Path
) -> None:
    theirs = FakeLlama(port=settings.port).start()
    try:
        with channel(settings, store) as ch:
            assert ch.wait_ready(10), ch.status
            assert ch.spawned_pid is None
            ch.record_saved("global", store.save("global", TARGET).record)
            assert ch.wait_idle(5)
            snaps = [store.snapshot("global")]
            assert ch.query_scores(QUERY, snaps)
            theirs.stop()  # its owner exited
            # A new question needs a request (the first one's vector is cached): it fails, and that
            # sends the worker to check on the backend.
            assert ch.query_scores(QUERY + " again", snaps) == {}
            deadline = time.monotonic() + 10
            while ch.spawned_pid is None or not ch.ready:
                assert time.monotonic() < deadline, ch.status
                time.sleep(0.02)
            pid = ch.spawned_pid
            # Theirs served another model (fake-embed), ours is all-minilm: the sidecar is re-embedded.
            assert ch.wait_idle(5)
            assert ch.query_scores(QUERY, [store.snapshot("global")])
        assert [s["pid"] for s in read_spawns(argv_file)] == [pid]
        assert wait_gone(pid, 5)
    finally:
        theirs.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only (documented limit)")
def test_our_llama_server_dies_with_us_even_when_we_are_sigkilled(
    settings: VectorSettings, store_dir: Path, argv_file: Path
) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {SRC!r})
        from dsh_memory_mcp.config import VectorSettings
        from dsh_memory_mcp.store.shared import SharedStore
        from dsh_memory_mcp.search.vectors import VectorChannel
        store = SharedStore({str(store_dir)!r}); store.prepare()
        ch = VectorChannel(VectorSettings(exe={settings.exe!r}, model={settings.model!r}, port={settings.port},
                                          threads=2, model_id="all-minilm-l6-v2"), store)
        ch.start()
        assert ch.wait_ready(20), ch.status
        print(ch.spawned_pid, flush=True)
        time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, encoding="utf-8")
    child: int | None = None
    try:
        assert proc.stdout is not None
        child = int(proc.stdout.readline())
        assert pid_alive(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert wait_gone(child, 5), "the spawned llama-server outlived its SIGKILLed parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
        kill_quietly(child if child and pid_alive(child) else None)
