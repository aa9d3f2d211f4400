"""Saves append one line; reads of a file that only grew parse only the tail; torn tails are repaired.

A save does not rewrite the scope file. These tests pin what that must not break:
the bytes other writers wrote, a line left unfinished by a crash, exact dedupe, concurrent
appenders and rewriters in real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.store import records
from dsh_memory_mcp.store.layout import StoreLayout
from dsh_memory_mcp.store.records import CorruptLine, Record
from dsh_memory_mcp.store.shared import SharedStore
from dsh_memory_mcp.store.snapshots import SnapshotCache
from tests.helpers.clock import FakeClock
from tests.helpers.store_procs import worker_env

WORKER = str(Path(__file__).resolve().parent / "helpers" / "append_worker.py")
PROJECT = "project:/home/me/app"


def dsh_line(n: int, content: str | None = None) -> str:
    """A line as DSH's JSON.stringify writes it, with a field we do not know."""
    return json.dumps(
        {
            "id": f"00000000-0000-4000-8000-{n:012d}",
            "scope": "global",
            "kind": "fact",
            "content": content or f"DSH 写的第 {n} 条记忆 memory {n}",
            "tags": [],
            "source": {"origin": "explicit"},
            "createdAt": 1760000000000 + n,
            "updatedAt": 1760000000000 + n,
            "lastAccessedAt": 1760000000000 + n,
            "accessCount": 0,
            "dshOnly": {"n": n},
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


@pytest.fixture
def store(store_dir: Path):
    s = SharedStore(str(store_dir), touch_delay=60.0)
    s.prepare()
    yield s
    s.close()


def test_a_save_appends_one_line_and_leaves_every_earlier_byte_and_the_inode_in_place(store, store_dir):
    path = store_dir / "global.jsonl"
    path.write_text("".join(dsh_line(n) + "\n" for n in range(50)), encoding="utf-8")
    before = path.read_bytes()
    inode, mode = path.stat().st_ino, path.stat().st_mode
    rec = store.save("global", "appended, not rewritten").record
    after = path.read_bytes()
    assert after == before + rec.raw.encode("utf-8") + b"\n"
    assert path.stat().st_ino == inode  # a rewrite would have renamed a new file over it
    assert path.stat().st_mode == mode  # DSH's file keeps the mode it chose


def test_a_new_scope_file_is_created_by_the_append_with_mode_0600(store, store_dir):
    rec = store.save(PROJECT, "first memory of a project").record
    path = Path(store.scope_path(PROJECT))
    assert path.read_bytes() == rec.raw.encode("utf-8") + b"\n"
    if sys.platform != "win32":
        assert path.stat().st_mode & 0o777 == 0o600


def test_an_append_written_store_reads_back_byte_identically_in_a_fresh_process(store, store_dir):
    path = store_dir / "global.jsonl"
    path.write_text("".join(dsh_line(n) + "\n" for n in range(3)), encoding="utf-8")
    for i in range(5):
        store.save("global", f'追加的记忆 {i} with \\ and "quotes" and emoji 🧠')
    store.insert("global", [records.new_record(scope="global", content="inserted by an import")])
    code = (
        "import sys, json; from dsh_memory_mcp.store.shared import SharedStore\n"
        "snap = SharedStore(sys.argv[1]).snapshot('global')\n"
        "sys.stdout.buffer.write(''.join(l.raw + '\\n' for l in snap.lines).encode('utf-8'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(store_dir)], capture_output=True, env=worker_env(), timeout=60, check=True
    ).stdout
    assert out == path.read_bytes()
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and all(json.loads(line)["id"] for line in lines[:-1])
    assert [json.loads(line).get("dshOnly") for line in lines[:3]] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_a_file_that_only_grew_is_extended_not_reparsed_and_the_index_carries_forward(store_dir):
    mine = SharedStore(str(store_dir))
    mine.prepare()
    for i in range(30):
        mine.save("global", f"kept record {i} about caching")
    before = mine.snapshot("global")
    old_index = scoring.index_for(before)
    parses = mine._snapshots.stats["parses"]
    other = SharedStore(str(store_dir))
    other.save("global", "written by someone else about caching")
    after = mine.snapshot("global")
    assert mine._snapshots.stats["parses"] == parses  # nothing parsed whole
    assert mine._snapshots.stats["extends"] == 1
    assert len(after.records) == 31 and after.records[-1].content == "written by someone else about caching"
    assert all(a is b for a, b in zip(before.records, after.records[:30], strict=True))
    assert after.cache.get(scoring.PREVIOUS_CACHE_KEY) is old_index
    assert scoring.index_for(after).df(scoring.stem("caching")) == 31
    # The grown version dedupes against the appended record too.
    assert mine.save("global", "  written by someone else about caching ").deduped


def test_a_file_rewritten_in_place_to_a_longer_one_is_read_whole_not_extended(store, store_dir):
    path = store_dir / "global.jsonl"
    path.write_text("".join(dsh_line(n) + "\n" for n in range(20)), encoding="utf-8")
    assert len(store.snapshot("global").records) == 20
    # Same inode, longer, but an earlier line changed: the probes see it.
    text = path.read_text(encoding="utf-8").replace("第 0 条", "第 零零零 条")
    with open(path, "r+", encoding="utf-8") as f:
        f.write(text + dsh_line(99) + "\n")
    snap = store.snapshot("global")
    assert store._snapshots.stats["extends"] == 0
    assert snap.records[0].content == "DSH 写的第 零零零 条记忆 memory 0"
    assert len(snap.records) == 21


def test_a_torn_last_line_stays_a_corrupt_line_of_its_own_and_is_never_glued_to_the_next(store, store_dir):
    path = store_dir / "global.jsonl"
    whole = [dsh_line(n) for n in range(3)]
    partial = dsh_line(3)[:57]  # a writer SIGKILLed between its write and its newline
    path.write_bytes(("".join(line + "\n" for line in whole) + partial).encode("utf-8"))
    snap = store.snapshot("global")
    assert snap.torn and snap.lines[-1] == CorruptLine(partial, 4)
    rec = store.save("global", "saved after the crash").record
    assert path.read_bytes() == ("".join(line + "\n" for line in whole) + partial + "\n" + rec.raw + "\n").encode(
        "utf-8"
    )
    fresh = SharedStore(str(store_dir)).snapshot("global")
    assert [type(line) for line in fresh.lines] == [Record, Record, Record, CorruptLine, Record]
    assert fresh.lines[3] == CorruptLine(partial, 4)
    assert fresh.records[-1].id == rec.id
    # A rewrite keeps it too, verbatim and on its own line.
    store.delete_ids([json.loads(whole[0])["id"]])
    assert partial + "\n" in path.read_text(encoding="utf-8")


def test_a_valid_last_line_without_newline_stays_a_record_after_the_append(store, store_dir):
    path = store_dir / "global.jsonl"
    path.write_bytes((dsh_line(1) + "\n" + dsh_line(2)).encode("utf-8"))
    store.save("global", "after a file without final newline")
    fresh = SharedStore(str(store_dir)).snapshot("global")
    assert [r.content for r in fresh.records][1:] == [
        "DSH 写的第 2 条记忆 memory 2",
        "after a file without final newline",
    ]
    assert all(isinstance(line, Record) for line in fresh.lines)


def test_dedupe_stays_exact_across_appends_rewrites_and_expiry(store):
    first = store.save("global", "同一句话 the same sentence").record
    for i in range(200):
        store.save("global", f"filler {i}")
    again = store.save("global", "  同一句话 the same sentence\n")
    assert again.deduped and again.record.id == first.id
    assert store.save(PROJECT, "同一句话 the same sentence").deduped is False  # another scope
    store.delete_ids([first.id])  # a rewrite: the index is rebuilt, the old id is gone
    revived = store.save("global", "同一句话 the same sentence")
    assert not revived.deduped and revived.record.id != first.id
    # A superseded (expired) record is no duplicate.
    newer = store.save("global", "newer wording", supersedes=revived.record.id)
    assert newer.superseded is not None and newer.superseded.id == revived.record.id
    assert store.save("global", "同一句话 the same sentence").deduped is False


def test_background_touch_flushes_rewrite_a_scope_at_most_once_per_interval(store_dir):
    clock = FakeClock(auto=False)  # the 2 s delay and the 30 s interval pass by `advance` only
    s = SharedStore(str(store_dir), touch_delay=2.0, touch_interval=30.0, timing=clock)
    s.prepare()
    rid = s.save("global", "touched often").record.id
    path = Path(s.scope_path("global"))

    def timer_ran(times: int) -> None:
        deadline = time.monotonic() + 10
        while s._touches.timer_runs < times:
            assert time.monotonic() < deadline, f"the touch timer did not run {times} times"
            time.sleep(0.005)

    s.touch({"global": [rid]})
    clock.advance(2.0)
    timer_ran(1)
    assert s.snapshot("global").records[0].access_count == 1  # the first flush is written
    inode = path.stat().st_ino
    for _ in range(5):
        s.touch({"global": [rid]})
    clock.advance(2.0)
    timer_ran(2)
    assert path.stat().st_ino == inode  # the timer ran within the interval: no second rewrite
    assert s.snapshot("global").records[0].access_count == 1
    clock.advance(28.0)  # 30 s after the first flush
    timer_ran(3)
    assert path.stat().st_ino != inode and s.snapshot("global").records[0].access_count == 6
    s.touch({"global": [rid]})
    s.close()  # exit writes what is pending, interval or not
    assert SharedStore(str(store_dir)).snapshot("global").records[0].access_count == 7


def test_the_snapshot_cache_is_bounded_and_still_answers_correctly(store_dir):
    layout = StoreLayout.at(str(store_dir))
    s = SharedStore(str(store_dir))
    s.prepare()
    s._snapshots = SnapshotCache(layout, max_entries=3, max_records=50)
    names = [f"project:/p/{i}" for i in range(6)]
    for name in names:
        for j in range(20):
            s.save(name, f"{name} record {j}")
    assert len(s._snapshots) <= 3 and s._snapshots._records <= 50 + 20
    for name in names:
        assert len(s.snapshot(name).records) == 20
    assert s._snapshots.stats["evictions"] > 0
    assert sorted(s.discover_scopes()) == sorted(names)


@pytest.mark.slow
def test_concurrent_appenders_and_rewriters_keep_every_acknowledged_record_once_and_drop_every_forgotten(
    store_dir: Path, tmp_path: Path
):
    SharedStore(str(store_dir)).prepare()
    go = tmp_path / "go"
    plan = [("save", f"a{n}", 40) for n in range(4)] + [("forget", "f0", 15), ("touch", "t0", 15)]
    acked: list[str] = []
    gone: list[str] = []
    procs: list[subprocess.Popen[str]] = []
    try:
        for mode, tag, n in plan:
            procs.append(
                subprocess.Popen(
                    [sys.executable, WORKER, mode, str(store_dir), "global", tag, str(n), str(go)],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True, encoding="utf-8",
                    env=worker_env(),
                )
            )
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        go.touch()
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            lines = out.splitlines()
            assert lines[-1] == "done", err
            acked += [line[4:] for line in lines if line.startswith("ack ")]
            gone += [line[5:] for line in lines if line.startswith("gone ")]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    assert len(acked) == 160 and len(gone) == 15
    raw = (store_dir / "global.jsonl").read_text(encoding="utf-8")
    lines = records.parse_lines(raw)
    assert all(isinstance(line, Record) for line in lines)
    contents = [line.content for line in lines if isinstance(line, Record)]
    assert sorted(contents) == sorted(acked)  # every acknowledged save exactly once, no forgotten one
    assert not set(gone) & set(contents)
    assert raw.endswith("\n") and "\n\n" not in raw
    assert os.listdir(store_dir / ".locks") == []


def test_an_index_extended_by_appends_answers_exactly_like_one_built_from_scratch(store_dir):
    s = SharedStore(str(store_dir), touch_delay=60.0)
    s.prepare()
    path = store_dir / "global.jsonl"
    # Another writer's duplicate id and an expired record must stay findable/hidden after extending.
    dup = dsh_line(7, "duplicate id deploy pipeline")
    path.write_text(dsh_line(1, "deploy pipeline runs first") + "\n" + dup + "\n", encoding="utf-8")
    scoring.index_for(s.snapshot("global"))
    for i in range(40):
        s.save("global", f"deploy 流水线 note {i}", importance=(i % 5) / 4)
        if i % 10 == 0:
            scoring.index_for(s.snapshot("global"))  # extended from the previous version each time
    with open(path, "a", encoding="utf-8") as f:  # an unlocked append of the same id again
        f.write(dup + "\n")
    scoring.index_for(s.snapshot("global"))  # a read that extends, then an index that extends
    old = s.snapshot("global").records[3]
    s.save("global", "replacement wording", supersedes=old.id)  # a rewrite: same records, one expired
    scoring.index_for(s.snapshot("global"))
    s.save("global", "部署流水线 after the supersede")
    snap = s.snapshot("global")
    previous = snap.cache[scoring.PREVIOUS_CACHE_KEY]
    extended = scoring.index_for(snap)
    assert extended.records[: len(previous.records)] == previous.records  # built by extending
    fresh = scoring.LexicalIndex.build(snap.records)
    now = records.now_ms()
    for query in ("deploy pipeline", "流水线", "note 3", "部署", "replacement"):
        tokens = scoring.query_tokens(query)
        assert extended.scores(tokens, threshold=0.1) == fresh.scores(tokens, threshold=0.1)
        got = scoring.rank([snap], query, top_k=50, now=now)
        snap.cache.pop("lexical")
        snap.cache["lexical"] = fresh
        want = scoring.rank([snap], query, top_k=50, now=now)
        snap.cache["lexical"] = extended
        assert [(h.record.id, h.score) for h in got] == [(h.record.id, h.score) for h in want]
    assert extended.positions_of(json.loads(dup)["id"]) == fresh.positions_of(json.loads(dup)["id"])


def test_ids_and_id_prefixes_are_found_after_appends_rewrites_and_foreign_duplicates(store, store_dir):
    ids = [store.save(scope, f"memory {i} in {scope}").record.id for i in range(30) for scope in ("global", PROJECT)]
    assert store.find([ids[0]])[ids[0]][0].id == ids[0]  # builds the index
    more = [store.save("global", f"later memory {i}").record.id for i in range(10)]  # the index is extended
    path = store_dir / "global.jsonl"
    with open(path, "a", encoding="utf-8") as f:  # another writer leaves the same id twice
        f.write(dsh_line(5) + "\n" + dsh_line(5, "same id, second line") + "\n")
    store.delete_ids([ids[2]])  # a rewrite
    dup = json.loads(dsh_line(5))["id"]
    keys = [*ids[::7], *more[::3], dup, dup[:8], ids[2], ids[4][:10].upper(), "0000000", "ffffffff"]
    found = store.find(keys)
    for key in keys:
        want = key.strip().lower()
        expected = [
            r.id
            for scope in store.discover_scopes()
            for r in store.snapshot(scope).records
            if len(want) >= 8 and r.id.lower().startswith(want)
        ]
        assert [r.id for r in found[key]] == expected, key
    assert [r.content for r in found[dup]] == ["DSH 写的第 5 条记忆 memory 5", "same id, second line"]
    assert found[ids[2]] == [] and found["0000000"] == []
