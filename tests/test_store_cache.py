"""A new version of a scope file starts from the old version's derived data (lexical index)."""

from __future__ import annotations

from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.store.shared import SharedStore


def test_after_our_own_write_the_lexical_index_is_extended_not_rebuilt(store_dir):
    store = SharedStore(str(store_dir))
    store.prepare()
    for i in range(20):
        store.save("global", f"memory number {i} about caching")
    old = scoring.index_for(store.snapshot("global"))
    store.save("global", "one more memory about caching")
    snap = store.snapshot("global")
    assert snap.cache.get(scoring.PREVIOUS_CACHE_KEY) is old
    new = scoring.index_for(snap)
    assert len(new) == 21 and new.df(scoring.stem("caching")) == 21
    assert scoring.PREVIOUS_CACHE_KEY not in snap.cache  # dropped once used: no chain of old versions


def test_a_touch_flush_carries_the_index_forward_and_search_still_sees_the_new_counts(store_dir):
    store = SharedStore(str(store_dir), touch_delay=60)
    store.prepare()
    rid = store.save("global", "touch me about indexes").record.id
    old = scoring.index_for(store.snapshot("global"))
    store.touch({"global": [rid]})
    store.flush()
    snap = store.snapshot("global")
    assert snap.records[0].access_count == 1
    assert snap.cache.get(scoring.PREVIOUS_CACHE_KEY) is old
    hits = scoring.rank([snap], "indexes", top_k=5, now=snap.records[0].updated_at + 1)
    assert hits and hits[0].record.access_count == 1  # the new version's record, not the old one


def test_an_external_rewrite_also_starts_from_the_previous_index(store_dir):
    store = SharedStore(str(store_dir))
    store.prepare()
    store.save("global", "first external memory")
    scoring.index_for(store.snapshot("global"))
    path = store_dir / "global.jsonl"
    other = SharedStore(str(store_dir))
    other.save("global", "second, written by another process")
    assert path.read_text(encoding="utf-8").count("\n") == 2
    snap = store.snapshot("global")
    assert scoring.PREVIOUS_CACHE_KEY in snap.cache
    assert len(scoring.index_for(snap)) == 2


def test_a_re_read_after_another_writers_save_reuses_the_unchanged_records(store_dir):
    mine = SharedStore(str(store_dir))
    mine.prepare()
    for i in range(5):
        mine.save("global", f"kept record {i}")
    before = mine.snapshot("global").records
    SharedStore(str(store_dir)).save("global", "written by someone else")
    after = mine.snapshot("global").records
    assert len(after) == 6
    assert all(a is b for a, b in zip(before, after[:5], strict=True))
    assert after[5].content == "written by someone else"


def test_the_content_index_finds_every_record_of_a_text_in_file_order_across_appends_and_merges():
    from dsh_memory_mcp.store.records import new_record
    from dsh_memory_mcp.store.snapshots import ContentIndex

    texts = ["same text", "  same text  ", "other", "记忆 中文", "same text\n", "Same text"]
    made = [new_record(scope="global", content=texts[i % len(texts)], record_id=f"r{i}", now=1) for i in range(3000)]
    index = ContentIndex.build(made[:100])
    old = index
    for start in range(100, 3000, 50):  # small appends, then one past an eighth of the base: a merge
        index = index.extended(made[start : start + 50])

    def want(key: str, upto: int) -> list[str]:
        return [r.id for r in made[:upto] if r.content.strip() == key]

    for key in ("same text", "other", "记忆 中文", "Same text", "missing"):
        assert [r.id for r in index.get(key)] == want(key, 3000)
        assert [r.id for r in old.get(key)] == want(key, 100)  # an older snapshot's index is unchanged
    assert index.get("same text")[0].id == "r0" and len(index.get("same text")) == 1500


def test_an_index_directory_an_older_version_left_is_neither_read_nor_written(tmp_path):
    """Nothing derived is kept on disk any more: a big store's `.index/` (here a junk cache file and a
    symlink out of the store) stays byte-for-byte as it was, and search answers from the JSONL."""
    import os

    from dsh_memory_mcp.config import resolve_settings
    from dsh_memory_mcp.service.compose import close_service, open_service
    from dsh_memory_mcp.store import records, scopes

    store = tmp_path / "store"
    store.mkdir()
    lines = [
        records.new_record(
            scope=scopes.GLOBAL, content=f"routine note {i} about the build", now=1_790_000_000_000 + i
        ).raw
        for i in range(2500)
    ]
    lines[1234] = records.new_record(
        scope=scopes.GLOBAL, content="灰度发布 uses the canary-zebra pool", now=1_790_000_000_000
    ).raw
    (store / "global.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    left = store / ".index"
    left.mkdir()
    (left / "0123abcd.idx").write_bytes(b"DSHIDX\n" + b"\xff" * 4096)
    outside = tmp_path / "outside"
    outside.write_text("not ours", encoding="utf-8")
    os.symlink(outside, left / "link.idx")
    before = {p.name: (p.lstat().st_mtime_ns, p.read_bytes()) for p in left.iterdir()}
    service = open_service(
        resolve_settings(store_dir=str(store), project_dir=str(tmp_path), env={"DSH_MEMORY_VECTOR": "off"}),
        warm="all",
    )
    try:
        found = service.call("memory_search", {"query": "canary-zebra 灰度发布", "topK": 3}).structured["records"]
        assert found and found[0]["content"] == "灰度发布 uses the canary-zebra pool"
    finally:
        close_service(service)
    assert {p.name: (p.lstat().st_mtime_ns, p.read_bytes()) for p in left.iterdir()} == before
    assert outside.read_text(encoding="utf-8") == "not ours"
