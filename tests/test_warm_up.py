"""The warm-up gives way to tool calls: background reads and index builds pause while a call runs,
a read of one scope never waits for another's, and a save right after start is answered while
the warm-up has not finished indexing a scope the save does not need."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from dsh_memory_mcp.config import resolve_settings
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.store import records, scopes
from dsh_memory_mcp.store.foreground import Foreground
from dsh_memory_mcp.store.layout import StoreLayout
from dsh_memory_mcp.store.snapshots import SnapshotCache
from tests.conftest import PYTHON, subprocess_env
from tests.helpers.clock import FakeClock
from tests.helpers.polling import until


def fill(path: Path, scope: str, n: int, words: str = "部署流水线 deploy pipeline") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    made = [
        records.new_record(scope=scope, content=f"record {i} {words} {i % 97}", now=1_700_000_000_000 + i)
        for i in range(n)
    ]
    path.write_bytes(b"".join(r.raw_bytes + b"\n" for r in made))


def test_a_background_pause_returns_at_once_when_idle_and_waits_out_a_call_and_the_quiet_after_it():
    clock = FakeClock(auto=False)
    fg = Foreground(clock, quiet=0.05)
    assert fg.pause() == 0.0 and fg.stats["pauses"] == 0  # nothing runs: no wait at all
    done = threading.Event()
    call = fg.call()
    call.__enter__()
    worker = threading.Thread(target=lambda: (fg.pause(), done.set()))
    worker.start()
    until("the pause to start waiting", lambda: fg.stats["pauses"] == 1)
    clock.advance(10.0)  # however long the call takes, the pause waits for it
    assert not done.wait(0.05)
    call.__exit__(None, None, None)
    assert not done.wait(0.05)  # the call ended a moment ago: still the quiet time after it
    clock.advance(0.06)
    assert done.wait(5.0)
    worker.join(5.0)
    assert fg.stats["calls"] == 1 and fg.pause() == 0.0  # the call ended and its quiet time passed


def test_a_pause_ends_as_soon_as_someone_waits_for_what_the_background_holds():
    fg = Foreground(FakeClock(auto=False))
    wanted = threading.Event()
    with fg.call():
        ended = threading.Event()
        worker = threading.Thread(target=lambda: (fg.pause(resume=wanted.is_set), ended.set()))
        worker.start()
        until("the pause to start waiting", lambda: fg.stats["pauses"] == 1)
        assert not ended.wait(0.05)
        wanted.set()  # a call now waits for the read in progress: carry on, though the call runs
        assert ended.wait(5.0)
    worker.join(5.0)


def test_a_whole_read_of_one_scope_never_waits_for_the_read_of_another(tmp_path: Path):
    layout = StoreLayout.at(str(tmp_path))
    cache = SnapshotCache(layout)
    first = str(tmp_path / "projects" / "a.jsonl")
    # A second file whose path the old striped locks (hash % 8) would have put on the same lock.
    other = next(p for i in range(1000) if hash(p := str(tmp_path / "projects" / f"b{i}.jsonl")) % 8 == hash(first) % 8)
    fill(Path(first), "global", 10)
    fill(Path(other), "global", 10)
    with cache._whole_read(first):  # another thread's read of `first`, in progress
        got: list[int] = []
        reader = threading.Thread(target=lambda: got.append(len(cache.load(other, None).records)))
        reader.start()
        reader.join(10.0)
        assert got == [10]
    # …while a read of the same file waits for the one in progress.
    with cache._whole_read(first):
        same = threading.Thread(target=lambda: cache.load(first, None))
        same.start()
        until("the second reader to wait", lambda: cache._parsing[first].waiting == 1)
    same.join(10.0)
    assert not same.is_alive()


def test_a_save_right_after_start_is_answered_before_the_warm_up_indexed_a_scope_it_does_not_need(
    tmp_path: Path,
):
    """A freshly started stdio server indexes its default scopes in the background; a save to
    global that arrives meanwhile is answered while the project scope's index is still unbuilt
    (the server's own debug log tells the order), the warm-up paused for it, and once alone it
    finishes that index as if nothing had interrupted it."""
    store = tmp_path / "store"
    project = tmp_path / "work"
    project.mkdir()
    key = scopes.project_key(str(project), "/")
    fill(store / scopes.scope_file_relpath(key), key, 30_000)  # ~1 s of tokenising: the warm-up's work
    fill(store / scopes.scope_file_relpath(scopes.GLOBAL), scopes.GLOBAL, 50)
    log = tmp_path / "stderr.log"
    env = subprocess_env() | {
        "DSH_MEMORY_DEBUG": "1",
        "DSH_MEMORY_VECTOR": "off",
        "DSH_MEMORY_DIGEST": "off",
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "dsh_memory_mcp", "--store-dir", str(store), "--project", str(project)],
        env=env,
        cwd=str(project),
    )
    indexed = f"records of {key} indexed"
    query = {"query": "deploy pipeline 42", "topK": 5}

    async def run() -> tuple[str, dict[str, object], list[tuple[str, float]]]:
        with log.open("w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                result = await s.call_tool("memory_save", {"content": "保存于启动之后 saved right after start"})
                seen = log.read_text(encoding="utf-8")  # what the server had logged when it answered
                await anyio.to_thread.run_sync(
                    lambda: until(
                        "the warm-up to finish", lambda: "warm-up: done" in log.read_text("utf-8"), timeout=120
                    )
                )
                search = await s.call_tool("memory_search", query)
                hits = [(h["id"], h["score"]) for h in (search.structured_content or {}).get("records", [])]
                return seen, dict(result.structured_content or {}), hits

    seen, answer, hits = anyio.run(run)
    assert answer.get("ok") is True and answer.get("scope") == scopes.GLOBAL, answer
    assert indexed not in seen, seen[-3000:]  # answered before the unrelated scope's index was built
    after = log.read_text(encoding="utf-8")
    done = next(line for line in after.splitlines() if "warm-up: done" in line)
    assert indexed in after and "paused 0 times" not in done, done  # it gave way to the save, then went on
    # The index it finished in steps around the save answers like a cold build in another process.
    cold = open_service(
        resolve_settings(store_dir=str(store), project_dir=str(project), env={"DSH_MEMORY_VECTOR": "off"})
    )
    try:
        expected = [(h["id"], h["score"]) for h in cold.call("memory_search", query).structured["records"]]
    finally:
        close_service(cold)
    assert len(hits) == 5 and hits == expected


_WARM_SCRIPT = """
import sys, threading, time
from dsh_memory_mcp.config import resolve_settings
from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.store import scopes

service = open_service(
    resolve_settings(store_dir=sys.argv[1], project_dir=sys.argv[2], env={"DSH_MEMORY_VECTOR": "off"}), warm=sys.argv[3]
)
for t in [t for t in threading.enumerate() if t.name == "dsh-memory-warm-up"]:
    t.join(120)
index = scoring.index_for(service.store.snapshot(scopes.GLOBAL))
cols = index._tables.columns
print("numpy" in sys.modules, cols is not None and cols.filled >= len(index))
close_service(service)
"""


def test_the_warm_up_has_numpy_and_the_search_columns_ready_before_the_first_search(tmp_path: Path):
    """The search runs on numpy columns; serve's and a stdio server's warm-up import numpy and
    fill the columns of the scopes they indexed, so the first search pays for neither."""
    import subprocess

    project = tmp_path / "work"
    project.mkdir()
    results = {}
    for name, n, warm in (("serve", 2500, "all"), ("stdio", 300, "default")):
        store = tmp_path / name
        fill(store / scopes.scope_file_relpath(scopes.GLOBAL), scopes.GLOBAL, n)
        done = subprocess.run(
            [PYTHON, "-c", _WARM_SCRIPT, str(store), str(project), warm],
            env=subprocess_env() | {"XDG_STATE_HOME": str(tmp_path / "state")},
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        results[name] = done.stdout.split()
    assert results == {"serve": ["True", "True"], "stdio": ["True", "True"]}
