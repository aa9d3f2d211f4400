"""The lexical index kept on disk (`search.index_cache`): used when it describes the file's texts,
rebuilt when it does not, and a search answers exactly as after a cold build either way."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.search.index_cache import CACHE_DIR, IndexCache
from dsh_memory_mcp.store import records, scopes
from dsh_memory_mcp.store.shared import SharedStore
from dsh_memory_mcp.store.snapshots import DERIVED_KEY

N = 3000
QUERIES = ["deploy pipeline", "部署流水线", "record 17", "docker image 镜像", "zebra", "nightly backups"]
WORDS = ["deploy", "pipeline", "docker", "image", "nightly", "backups", "部署", "流水线", "镜像", "备份"]


def fill(store_dir: Path, n: int = N) -> Path:
    path = store_dir / scopes.scope_file_relpath(scopes.GLOBAL)
    path.parent.mkdir(parents=True, exist_ok=True)
    made = [
        records.new_record(
            scope="global",
            content=f"record {i} {WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} 第{i % 13}条",
            tags=["ops"] if i % 5 == 0 else [],
            now=1_700_000_000_000 + i,
        )
        for i in range(n)
    ]
    path.write_text("".join(r.raw + "\n" for r in made), encoding="utf-8")
    return path


def opened(store_dir: Path) -> tuple[SharedStore, IndexCache]:
    """A store as a freshly started server opens it (nothing of the file in memory yet)."""
    cache = IndexCache(str(store_dir), min_records=100, save_delay=60.0)
    return SharedStore(str(store_dir), derived=cache), cache


def answers(index: scoring.LexicalIndex) -> list[dict[int, float]]:
    return [index.scores(scoring.query_tokens(q), threshold=0.0) for q in QUERIES]


def search_as_a_server_would(store_dir: Path) -> tuple[IndexCache, list[dict[int, float]], list[list[str]]]:
    """Open, index global (through the cache), and check every answer against a cold build."""
    store, cache = opened(store_dir)
    snap = store.snapshot("global")
    index = scoring.index_for(snap)
    cold = scoring.LexicalIndex.build(tuple(snap.records))
    assert answers(index) == answers(cold)
    ranked = [[h.record.id for h in scoring.rank([snap], q, top_k=5, now=2**62)] for q in QUERIES]
    cold_snap = type("Cold", (), {"scope": "global", "records": tuple(snap.records), "cache": {}})()
    assert ranked == [[h.record.id for h in scoring.rank([cold_snap], q, top_k=5, now=2**62)] for q in QUERIES]
    cache.close()  # saves what is due, as a server does at exit
    store.close()
    return cache, answers(index), ranked


@pytest.fixture
def cached(store_dir: Path) -> Path:
    """A scope file and the cache file a first server left for it."""
    path = fill(store_dir)
    first, _, _ = search_as_a_server_would(store_dir)
    assert first.stats["saves"] == 1 and first.stats["seeded"] == 0
    return path


def test_an_unchanged_file_is_indexed_from_the_cache_and_answers_exactly_like_a_cold_build(
    store_dir: Path, cached: Path
):
    cache, _, _ = search_as_a_server_would(store_dir)
    assert cache.stats["seeded"] == 1 and cache.stats["saves"] == 0  # nothing to save: it is current
    files = list((store_dir / CACHE_DIR).iterdir())
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE((store_dir / CACHE_DIR).stat().st_mode) == 0o700


def test_a_line_a_foreign_writer_appended_is_indexed_on_top_of_the_cached_tables(store_dir: Path, cached: Path):
    extra = records.new_record(scope="global", content="zebra crossing appended by DSH 斑马线", now=1)
    with cached.open("a", encoding="utf-8") as f:
        f.write(extra.raw + "\n")
    cache, found, _ = search_as_a_server_would(store_dir)
    assert cache.stats["seeded"] == 1
    assert N in found[QUERIES.index("zebra")]  # the appended record is searchable


def test_a_touch_rewrite_that_changes_no_text_still_uses_the_cache(store_dir: Path, cached: Path):
    store = SharedStore(str(store_dir), touch_interval=0.0)
    ids = [r.id for r in store.snapshot("global").records[:50]]
    store.touch({"global": ids})
    store.flush()  # a whole-file replace: new inode, new bytes on 50 lines, the same texts
    store.close()
    cache, _, _ = search_as_a_server_would(store_dir)
    assert cache.stats["seeded"] == 1


@pytest.mark.parametrize("first", ["the newer version", "the older version"])
def test_a_version_that_missed_the_seed_still_builds_on_the_cached_tables(store_dir: Path, cached: Path, first: str):
    """The warm-up took the cached tables for the version it read, and another process's touch
    flush replaced the file before a search read it: the search's version found no seed (the
    cache is read once per file and process) and tokenized every record again. Both versions now
    build on the cached tables, whichever is indexed first."""
    store, cache = opened(store_dir)
    older = store.snapshot("global")
    other = SharedStore(str(store_dir), touch_interval=0.0)
    other.touch({"global": [r.id for r in other.snapshot("global").records[:50]]})
    other.flush()  # a whole-file replace: new inode, the same texts
    other.close()
    newer = store.snapshot("global")
    assert newer is not older and newer.identity != older.identity
    seed = older.cache[DERIVED_KEY].seed(older.records)  # what the warm-up does, on the version it holds
    assert seed is not None
    older.cache[scoring.PREVIOUS_CACHE_KEY] = seed
    order = [newer, older] if first == "the newer version" else [older, newer]
    built = {id(snap): scoring.index_for(snap) for snap in order}
    tables = {id(built[id(snap)].text_tables()[0]) for snap in order}
    assert tables == {id(seed.text_tables()[0])}  # no version tokenized its records again
    for snap in order:
        assert answers(built[id(snap)]) == answers(scoring.LexicalIndex.build(tuple(snap.records)))
    assert cache.stats["seeded"] == 1
    cache.close()
    store.close()


@pytest.mark.parametrize(
    "change",
    ["replaced without one record", "a record edited in the middle", "truncated", "a record inserted at the start"],
)
def test_a_file_whose_texts_no_longer_match_is_indexed_from_scratch_and_the_cache_rebuilt(
    store_dir: Path, cached: Path, change: str
):
    lines = cached.read_text(encoding="utf-8").splitlines(keepends=True)
    if change == "replaced without one record":
        tmp = cached.with_name("global.jsonl.dsh")
        tmp.write_text("".join(lines[:100] + lines[101:]), encoding="utf-8")
        os.replace(tmp, cached)
    elif change == "a record edited in the middle":
        data = json.loads(lines[N // 2])
        data["content"] = data["content"].replace("record", "zebras")  # same length, same inode: new text
        lines[N // 2] = records.dump_line(data) + "\n"
        before = cached.stat()
        with cached.open("r+", encoding="utf-8") as f:  # in place
            f.write("".join(lines))
        after = cached.stat()
        assert (after.st_ino, after.st_size) == (before.st_ino, before.st_size)
    elif change == "truncated":
        os.truncate(cached, sum(len(line.encode("utf-8")) for line in lines[: N - 10]))
    else:
        first = records.new_record(scope="global", content="zebra first", now=1)
        cached.write_text(first.raw + "\n" + "".join(lines), encoding="utf-8")
    cache, _, _ = search_as_a_server_would(store_dir)  # every answer checked against a cold build
    assert cache.stats["seeded"] == 0 and cache.stats["stale"] == 1
    assert cache.stats["saves"] == 1  # and a cache for the file as it is now
    again, _, _ = search_as_a_server_would(store_dir)
    assert again.stats["seeded"] == 1


def test_a_damaged_or_foreign_cache_file_is_ignored_never_half_used(store_dir: Path, cached: Path):
    [cache_file] = list((store_dir / CACHE_DIR).iterdir())
    data = bytearray(cache_file.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a posting in the middle
    cache_file.write_bytes(bytes(data))
    cache, _, _ = search_as_a_server_would(store_dir)
    assert cache.stats["seeded"] == 0 and cache.stats["stale"] == 1 and cache.stats["saves"] == 1
    cache_file.write_bytes(b"not a cache at all\n")
    cache, _, _ = search_as_a_server_would(store_dir)
    assert cache.stats["seeded"] == 0 and cache.stats["stale"] == 1


def test_a_cache_whose_header_moved_bytes_between_sections_is_ignored(store_dir: Path, cached: Path):
    [cache_file] = list((store_dir / CACHE_DIR).iterdir())
    data = cache_file.read_bytes()
    start = data.index(b"\n") + 1
    end = data.index(b"\n", start)
    header = json.loads(data[start:end])
    sizes = header["sections"]
    sizes[1] -= 1  # one byte of the token list read as the first count: the same total length
    sizes[2] += 1
    cache_file.write_bytes(data[:start] + json.dumps(header).encode("utf-8") + data[end:])
    cache, _, _ = search_as_a_server_would(store_dir)
    assert cache.stats["seeded"] == 0 and cache.stats["stale"] == 1 and cache.stats["saves"] == 1


def test_read_only_commands_use_the_cache_but_never_write_one(store_dir: Path):
    fill(store_dir)
    cache = IndexCache(str(store_dir), read_only=True, min_records=100, save_delay=0.0)
    store = SharedStore(str(store_dir), derived=cache)
    scoring.index_for(store.snapshot("global"))
    cache.close()
    assert not (store_dir / CACHE_DIR).exists() and cache.stats["saves"] == 0


def test_the_digested_bytes_are_the_indexed_text_encoded_whether_the_content_lives_in_the_line_or_not():
    long_zh = "记" * (scoring.INDEX_CHARS - 3) + "忆ab"  # more bytes than the cut, fewer characters
    cases = [
        records.parse_line('{"id":"a","content":"plain 中文","tags":["t1","标签"]}'),
        records.parse_line('{"id":"b","content":"a \\"quote\\"","tags":["x\\ud800"]}'),
        records.parse_line('{"id":"c","content":"lone \\udc80"}'),
        records.parse_line(records.dump_line({"id": "d", "content": long_zh, "tags": ["t"]})),
        records.parse_line(records.dump_line({"id": "e", "content": "x" * (scoring.INDEX_CHARS + 5)})),
        records.Record({"id": "f", "content": "kept \ud800"}, '{"id":"f","content":"kept \ud800"}'),
    ]
    for rec in cases:
        assert isinstance(rec, records.Record)
        assert scoring.indexed_utf8(rec) == scoring.indexed_text(rec).encode("utf-8", "surrogatepass")
        assert rec.content_utf8 == rec.content.encode("utf-8", "surrogatepass")
