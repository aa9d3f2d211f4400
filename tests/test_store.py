"""SharedStore on real files: layout, snapshots and their cache, saves, deletes, touches, aliases."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.errors import LockRecursion, LockTimeout, ScopeError, StoreError
from dsh_memory_mcp.store.records import CorruptLine, Record
from dsh_memory_mcp.store.shared import SharedStore, records, scopes
from tests.helpers.store_procs import worker_env

PROJECT = "project:/home/me/app"
T0 = 1_760_000_000_000


class Clock:
    """A settable millisecond clock."""

    def __init__(self, start: int = T0) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int = 1000) -> int:
        self.now += ms
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(store_dir: Path, clock: Clock) -> SharedStore:
    s = SharedStore(str(store_dir), clock=clock, touch_delay=60.0, lock_timeout=2.0)
    s.prepare()
    yield s
    s.close()


def file_of(store: SharedStore, scope: str) -> Path:
    return Path(store.scope_path(scope))


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def tmp_leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*.tmp")]


# -- creation and prepare ------------------------------------------------------------------


def test_constructing_a_store_creates_nothing(store_dir: Path):
    s = SharedStore(str(store_dir))
    assert s.snapshot("global").records == ()
    assert s.discover_scopes() == []
    assert s.find(["12345678"]) == {"12345678": []}
    assert s.read_aliases() == {}
    s.flush()
    s.close()
    assert not store_dir.exists()


def test_prepare_creates_the_store_its_projects_and_locks_private(store_dir: Path):
    SharedStore(str(store_dir)).prepare()
    for path in (store_dir, store_dir / "projects", store_dir / ".locks"):
        assert path.is_dir()
        if os.name == "posix":
            assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert sorted(os.listdir(store_dir)) == [".locks", "projects"]  # the probe is gone


def test_prepare_never_changes_the_mode_of_an_existing_directory(store_dir: Path):
    store_dir.mkdir(mode=0o755)
    os.chmod(store_dir, 0o755)
    SharedStore(str(store_dir)).prepare()
    assert stat.S_IMODE(store_dir.stat().st_mode) == 0o755
    SharedStore(str(store_dir)).prepare()  # twice is fine


def test_prepare_reports_a_missing_parent_and_creates_nothing(tmp_path: Path):
    root = tmp_path / "no" / "such" / "store"
    with pytest.raises(StoreError) as info:
        SharedStore(str(root)).prepare()
    assert info.value.code == "STORE_ERROR"
    assert str(root) in info.value.message
    assert "不存在" in info.value.message and str(tmp_path / "no" / "such") in info.value.message
    assert "--store-dir" in info.value.message and "DSH_MEMORY_STORE_DIR" in info.value.message
    assert not (tmp_path / "no").exists()


def test_prepare_reports_a_store_path_that_is_a_file(tmp_path: Path):
    root = tmp_path / "store"
    root.write_text("not a directory", encoding="utf-8")
    with pytest.raises(StoreError) as info:
        SharedStore(str(root)).prepare()
    assert str(root) in info.value.message and "不是目录" in info.value.message
    assert root.read_text(encoding="utf-8") == "not a directory"


def test_prepare_reports_a_file_where_a_subdirectory_belongs(store_dir: Path):
    store_dir.mkdir()
    (store_dir / "projects").write_text("", encoding="utf-8")
    with pytest.raises(StoreError) as info:
        SharedStore(str(store_dir)).prepare()
    assert str(store_dir / "projects") in info.value.message


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_prepare_reports_a_store_that_is_not_writable(tmp_path: Path):
    if os.geteuid() != 0:
        root = tmp_path / "store"
        root.mkdir()
        (root / "projects").mkdir()
        (root / ".locks").mkdir()
        os.chmod(root, 0o500)
        try:
            with pytest.raises(StoreError) as info:
                SharedStore(str(root)).prepare()
        finally:
            os.chmod(root, 0o700)
        assert str(root) in info.value.message and "不可写" in info.value.message
        return
    # Root writes anywhere, so make the store a read-only bind mount in a private mount namespace.
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("running as root and `unshare` is missing: cannot make a directory unwritable for root")
    root = tmp_path / "store"
    root.mkdir()
    code = (
        "import sys\n"
        "from dsh_memory_mcp.errors import StoreError\n"
        "from dsh_memory_mcp.store.shared import SharedStore\n"
        "try:\n"
        "    SharedStore(sys.argv[1]).prepare()\n"
        "except StoreError as exc:\n"
        "    print(exc.code); print(exc.message)\n"
        "else:\n"
        "    print('PREPARED')\n"
    )
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" || exit 77; shift; exec "$@"'
    proc = subprocess.run(
        [unshare, "-m", "sh", "-c", script, "sh", str(root), sys.executable, "-c", code, str(root)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=worker_env(),
        timeout=60,
    )
    if proc.returncode == 77 or "Operation not permitted" in proc.stderr:
        pytest.skip(f"running as root without a usable read-only bind mount: {proc.stderr.strip()}")
    out = proc.stdout.splitlines()
    assert out[0] == "STORE_ERROR", proc.stdout + proc.stderr
    message = "\n".join(out[1:])
    assert str(root) in message and "不可" in message
    assert os.listdir(root) == []


# -- layout and snapshots ------------------------------------------------------------------


def test_scope_files_follow_the_shared_layout(store: SharedStore, store_dir: Path):
    assert store.scope_path("global") == str(store_dir / "global.jsonl")
    assert store.scope_path(PROJECT) == str(store_dir / "projects" / f"{scopes.scope_sha1(PROJECT)}.jsonl")


def test_a_missing_file_gives_an_empty_snapshot(store: SharedStore):
    snap = store.snapshot(PROJECT)
    assert (snap.scope, snap.identity, snap.lines, snap.records) == (PROJECT, None, (), ())
    assert store.snapshot(PROJECT) is snap


def test_an_unchanged_file_is_not_parsed_again(store: SharedStore):
    store.save("global", "one")
    first = store.snapshot("global")
    first.cache["lexical"] = "index"
    again = store.snapshot("global")
    assert again is first
    assert again.cache["lexical"] == "index"


def test_after_its_own_write_the_store_does_not_re_read_the_file(store: SharedStore):
    store.save("global", "one")
    before = store.snapshot("global")
    store.save("global", "two")
    after = store.snapshot("global")
    assert after is not before
    assert [r.content for r in after.records] == ["one", "two"]
    assert after.records[0] is before.records[0]  # not re-parsed: the very same object
    st = os.stat(store.scope_path("global"))
    assert after.identity == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    assert store.snapshot("global") is after


def test_an_external_append_is_seen_by_the_next_snapshot(store: SharedStore):
    store.save("global", "ours")
    first = store.snapshot("global")
    line = records.new_record(scope="global", content="appended by DSH", now=T0).raw
    with open(store.scope_path("global"), "ab") as f:
        f.write(line.encode("utf-8") + b"\n")
    second = store.snapshot("global")
    assert second is not first
    assert [r.content for r in second.records] == ["ours", "appended by DSH"]


def test_a_save_keeps_a_line_another_writer_appended_meanwhile(store: SharedStore, clock: Clock):
    """An appender that ignores the lock changes the file inside our transaction: we redo it."""
    path = store.scope_path("global")
    store.save("global", "first")
    appended = records.new_record(scope="global", content="unlocked append", now=T0).raw
    done = []

    def clock_with_a_rude_neighbour() -> int:
        if not done:
            done.append(True)
            with open(path, "ab") as f:
                f.write(appended.encode("utf-8") + b"\n")
        return T0

    rude = SharedStore(store.root, clock=clock_with_a_rude_neighbour)
    rude.save("global", "second")
    assert [r.content for r in store.snapshot("global").records] == ["first", "unlocked append", "second"]


def test_discover_scopes_lists_global_and_the_project_files_whose_name_matches(store: SharedStore, store_dir: Path):
    assert store.discover_scopes() == []
    store.save("global", "g")
    store.save(PROJECT, "p")
    store.save("session:abc", "s")
    store.save("我的笔记", "custom")
    projects = store_dir / "projects"
    (projects / f"{'0' * 40}.jsonl").write_bytes(
        records.new_record(scope="project:/elsewhere", content="wrong file").raw.encode() + b"\n"
    )
    (projects / f"{'1' * 40}.jsonl").write_bytes(b"")
    (projects / "notes.jsonl").write_bytes(records.new_record(scope="x", content="x").raw.encode() + b"\n")
    (projects / f"{scopes.scope_sha1('project:/unparseable')}.jsonl").write_bytes(b"{broken\n")
    assert store.discover_scopes() == ["global", *sorted([PROJECT, "session:abc", "我的笔记"])]


def test_corrupt_lines_are_kept_and_reported_once_with_file_and_line_number(
    store: SharedStore, caplog: pytest.LogCaptureFixture
):
    path = file_of(store, "global")
    good = records.new_record(scope="global", content="good", now=T0).raw
    path.write_bytes(f'{good}\n{{"id":"broken"\n\n[1,2]\n'.encode())
    caplog.set_level(logging.WARNING, logger="dsh_memory_mcp.store.snapshots")
    snap = store.snapshot("global")
    assert [type(line) for line in snap.lines] == [Record, CorruptLine, CorruptLine]
    assert snap.lines[1] == CorruptLine('{"id":"broken"', 2)
    assert snap.lines[2] == CorruptLine("[1,2]", 4)
    warnings = [r.getMessage() for r in caplog.records if r.name == "dsh_memory_mcp.store.snapshots"]
    assert len(warnings) == 2
    assert str(path) in warnings[0] and "第 2 行" in warnings[0] and "第 4 行" in warnings[1]
    caplog.clear()
    store.save("global", "another")  # the corrupt lines are read again, not reported again
    assert [r for r in caplog.records if r.name == "dsh_memory_mcp.store.snapshots"] == []
    assert b'{"id":"broken"' in lines_of(path) and b"[1,2]" in lines_of(path)


def test_bytes_that_are_not_utf8_survive_a_rewrite(store: SharedStore):
    path = file_of(store, "global")
    bad = b'{"id":"bad-bytes-0001","scope":"global","content":"caf\xe9 \xff"}'
    path.write_bytes(bad + b"\n" + b"\xfe\xfe not json\n")
    snap = store.snapshot("global")
    assert snap.records == ()
    assert len(snap.lines) == 2
    store.save("global", "new")
    assert lines_of(path)[:2] == [bad, b"\xfe\xfe not json"]
    assert store.snapshot("global").records[0].content == "new"


def test_a_file_with_windows_line_endings_is_written_back_as_it_was(store: SharedStore):
    path = file_of(store, "global")
    a = records.new_record(scope="global", content="a", now=T0).raw.encode()
    path.write_bytes(a + b"\r\n")
    store.save("global", "b")
    assert lines_of(path)[0] == a + b"\r"


# -- save ------------------------------------------------------------------------------------


def test_a_save_appends_one_compact_line_in_the_spec_key_order(store: SharedStore, store_dir: Path, clock: Clock):
    result = store.save(PROJECT, "用中文写的记忆", kind="preference", tags=["a", "标签"], importance=0.9)
    assert result.deduped is False and result.superseded is None
    path = file_of(store, PROJECT)
    [line] = lines_of(path)
    data = json.loads(line)
    assert list(data) == [
        "id",
        "scope",
        "kind",
        "content",
        "tags",
        "source",
        "createdAt",
        "updatedAt",
        "lastAccessedAt",
        "accessCount",
        "importance",
    ]
    assert data["scope"] == PROJECT and data["createdAt"] == clock.now and data["source"] == {"origin": "explicit"}
    assert "用中文写的记忆".encode() in line and b" " not in line
    assert line.decode() == result.record.raw
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert tmp_leftovers(store_dir) == []
    assert os.listdir(store_dir / ".locks") == []


def test_saving_the_same_content_again_is_deduped_and_writes_nothing(store: SharedStore):
    first = store.save("global", "Use pnpm, not npm")
    path = file_of(store, "global")
    before = path.read_bytes()
    identity = store.snapshot("global").identity
    again = store.save("global", "  Use pnpm, not npm \n")
    assert again.deduped is True
    assert again.record.id == first.record.id
    assert path.read_bytes() == before
    st = path.stat()
    assert (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == identity


def test_dedupe_ignores_expired_records_and_other_scopes(store: SharedStore, clock: Clock):
    old = store.save("global", "same")
    store.save("global", "replacement", supersedes=old.record.id)
    clock.advance()
    assert store.save("global", "same").deduped is False  # the old one is expired
    assert store.save(PROJECT, "same").deduped is False


def test_supersedes_in_the_same_scope_expires_the_old_record_in_the_same_rewrite(store: SharedStore, clock: Clock):
    old = store.save("global", "the build uses make")
    clock.advance()
    path = file_of(store, "global")
    result = store.save("global", "the build uses just", supersedes=old.record.id[:8])
    assert result.superseded is not None
    assert result.superseded.id == old.record.id
    assert result.superseded.data["expiredAt"] == clock.now - 1
    assert result.superseded.data["updatedAt"] == clock.now
    assert result.record.data["supersedes"] == old.record.id
    on_disk = [json.loads(line) for line in lines_of(path)]
    assert [d["content"] for d in on_disk] == ["the build uses make", "the build uses just"]
    assert on_disk[0]["expiredAt"] == clock.now - 1
    assert list(on_disk[0])[-1] == "expiredAt"  # a new key goes last, the others keep their place


def test_supersedes_by_prefix_reaches_another_scope(store: SharedStore, clock: Clock):
    old = store.save(PROJECT, "deploy with fabric")
    clock.advance()
    result = store.save("global", "deploy with ansible", supersedes=old.record.id[:8])
    assert result.superseded is not None and result.superseded.id == old.record.id
    [project_record] = store.snapshot(PROJECT).records
    assert project_record.data["expiredAt"] == clock.now - 1
    assert store.snapshot("global").records[0].data["supersedes"] == old.record.id


def test_supersedes_that_names_no_single_live_record_changes_nothing(store: SharedStore, clock: Clock):
    a = store.save("global", "a")
    before = file_of(store, "global").read_bytes()
    result = store.save(PROJECT, "b", supersedes="ffffffff-not-there")
    assert result.superseded is None and "supersedes" not in result.record.data
    # A prefix shorter than 8 characters names nothing.
    assert store.save(PROJECT, "c", supersedes=a.record.id[:7]).superseded is None
    assert file_of(store, "global").read_bytes() == before
    # An expired record cannot be superseded again: its expiredAt stays.
    assert store.save(PROJECT, "d", supersedes=a.record.id).superseded is not None
    expired = file_of(store, "global").read_bytes()
    clock.advance()
    assert store.save(PROJECT, "e", supersedes=a.record.id).superseded is None
    assert file_of(store, "global").read_bytes() == expired


def test_an_ambiguous_prefix_supersedes_nothing(store_dir: Path, clock: Clock):
    store_dir.mkdir()
    lines = [
        records.new_record(scope="global", content=f"r{i}", record_id=f"abcdef12-0000-4000-8000-00000000000{i}", now=T0)
        for i in range(2)
    ]
    (store_dir / "global.jsonl").write_bytes(records.render_bytes(lines))
    s = SharedStore(str(store_dir), clock=clock)
    result = s.save("global", "new", supersedes="abcdef12")
    assert result.superseded is None
    assert all("expiredAt" not in r.data for r in s.snapshot("global").records)


def test_a_deduped_save_still_hides_the_record_it_supersedes(store: SharedStore, clock: Clock):
    old = store.save("global", "old wording")
    existing = store.save("global", "new wording")
    clock.advance()
    result = store.save("global", "new wording", supersedes=old.record.id)
    assert result.deduped is True and result.record.id == existing.record.id
    assert result.superseded is not None and result.superseded.id == old.record.id
    assert len(store.snapshot("global").records) == 2


def test_superseding_a_record_with_its_own_content_makes_a_new_record_with_the_new_fields(
    store: SharedStore, clock: Clock
):
    old = store.save("global", "same words", kind="note", tags=["a"])
    clock.advance()
    result = store.save("global", "same words", kind="rule", tags=["b"], importance=0.5, supersedes=old.record.id)
    assert result.deduped is False and result.record.id != old.record.id
    assert result.superseded is not None and result.superseded.id == old.record.id
    by_id = {r.id: r for r in store.snapshot("global").records}
    assert by_id[old.record.id].expired_at is not None
    new = by_id[result.record.id]
    assert (new.kind, new.tags, new.importance, new.data["supersedes"]) == ("rule", ["b"], 0.5, old.record.id)


def test_a_supersede_carries_the_memorys_history_into_the_new_record(store: SharedStore, clock: Clock):
    """Created time, use count, last use and the original source go on; who edited is in editedBy;
    a supersede into another scope (a move) carries them the same way; keys keep the format's order."""
    first = store.save("global", "deploy with make", source={"origin": "explicit", "client": "codex/1.0"}).record
    created = first.created_at
    clock.advance()
    store.touch({"global": [first.id]})
    store.flush()
    used = next(r for r in store.snapshot("global").records if r.id == first.id)
    assert used.access_count == 1
    clock.advance()
    edit = {"origin": "explicit", "client": "web"}
    second = store.save("global", "deploy with just", supersedes=first.id, source=edit).record
    clock.advance()
    third = store.save(PROJECT, "deploy with just", tags=["x"], supersedes=second.id, source=edit).record
    for rec in (second, third):
        data = rec.data
        assert data["createdAt"] == created and data["createdAt"] < data["updatedAt"]
        assert (data["accessCount"], data["lastAccessedAt"]) == (1, used.last_accessed_at)
        assert data["source"] == {"origin": "explicit", "client": "codex/1.0"}
        assert data["editedBy"] == edit
        assert list(data)[:10] == list(first.data)[:10]
        assert list(data)[-2:] == ["supersedes", "editedBy"]
    assert third.data["supersedes"] == second.id and third.scope == PROJECT


def test_saves_from_many_threads_are_all_kept(store: SharedStore):
    def work(n: int) -> None:
        for i in range(15):
            store.save("global", f"thread {n} note {i}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    contents = [r.content for r in store.snapshot("global").records]
    assert sorted(contents) == sorted(f"thread {n} note {i}" for n in range(6) for i in range(15))


def test_a_save_times_out_while_another_process_holds_the_scope_lock(store_dir: Path):
    store = SharedStore(str(store_dir), lock_timeout=0.3)
    store.save("global", "before")
    before = file_of(store, "global").read_bytes()
    lock = Path(store.root) / ".locks" / f"{scopes.scope_sha1('global')}.lock"
    lock.write_text(
        json.dumps({"pid": os.getppid(), "host": "other", "createdAt": int(time.time() * 1000)}), encoding="utf-8"
    )
    with pytest.raises(LockTimeout) as info:
        store.save("global", "blocked")
    assert info.value.code == "LOCK_TIMEOUT" and str(lock) in info.value.message
    assert file_of(store, "global").read_bytes() == before


def test_the_scope_lock_is_the_one_saves_take(store: SharedStore):
    with store.lock("global"), pytest.raises(LockRecursion):
        store.save("global", "inside")
    store.save("global", "after")


def test_a_write_that_fails_raises_store_error_and_leaves_no_tmp(store: SharedStore, store_dir: Path):
    shutil.rmtree(store_dir / "projects")
    (store_dir / "projects").write_text("in the way", encoding="utf-8")
    with pytest.raises(StoreError) as info:
        store.save(PROJECT, "x")
    assert info.value.code == "STORE_ERROR"
    assert store.scope_path(PROJECT) in info.value.message
    assert tmp_leftovers(store_dir) == []
    assert os.listdir(store_dir / ".locks") == []


def test_an_unreadable_scope_file_is_a_store_error(store: SharedStore, store_dir: Path):
    (store_dir / "global.jsonl").mkdir()
    with pytest.raises(StoreError) as info:
        store.snapshot("global")
    assert str(store_dir / "global.jsonl") in info.value.message


# -- find and delete -------------------------------------------------------------------------


def test_find_takes_full_ids_and_prefixes_across_scopes_expired_included(store: SharedStore, clock: Clock):
    a = store.save("global", "a").record
    b = store.save(PROJECT, "b").record
    c = store.save(PROJECT, "c", supersedes=b.id).record
    clock.advance()
    found = store.find([a.id, b.id[:8], c.id.upper(), "1234567", "zzzzzzzz"])
    assert [r.id for r in found[a.id]] == [a.id]
    assert [r.id for r in found[b.id[:8]]] == [b.id]
    assert found[b.id[:8]][0].is_expired(clock.now)
    assert [r.id for r in found[c.id.upper()]] == [c.id]
    assert found["1234567"] == [] and found["zzzzzzzz"] == []


def test_delete_ids_removes_from_every_scope_inside_the_lock_and_tells_on_delete(store_dir: Path, clock: Clock):
    seen: list[tuple[str, list[str], bool, bool]] = []

    def on_delete(scope: str, ids: list[str]) -> None:
        path = s.scope_path(scope)
        gone = all(i not in Path(path).read_text(encoding="utf-8") for i in ids)
        locked = os.path.exists(os.path.join(s.root, ".locks", f"{scopes.scope_sha1(scope)}.lock"))
        seen.append((scope, ids, gone, locked))

    s = SharedStore(str(store_dir), clock=clock, on_delete=on_delete)
    keep = s.save("global", "keep").record
    g = s.save("global", "g").record
    p = s.save(PROJECT, "p").record
    removed = s.delete_ids([g.id, p.id, "00000000-0000-4000-8000-000000000000"])
    assert sorted(r.id for r in removed) == sorted([g.id, p.id])
    assert sorted(seen) == sorted([("global", [g.id], True, True), (PROJECT, [p.id], True, True)])
    assert [r.id for r in s.snapshot("global").records] == [keep.id]
    assert s.snapshot(PROJECT).records == ()
    assert s.delete_ids([g.id]) == []


def test_a_failing_on_delete_hook_is_logged_and_the_delete_stands(store_dir: Path, caplog: pytest.LogCaptureFixture):
    def on_delete(scope: str, ids: list[str]) -> None:
        raise RuntimeError("sidecar broke")

    s = SharedStore(str(store_dir), on_delete=on_delete)
    r = s.save("global", "x").record
    assert [x.id for x in s.delete_ids([r.id])] == [r.id]
    assert s.snapshot("global").records == ()
    assert any("on_delete" in rec.getMessage() for rec in caplog.records)


def test_delete_matching_is_case_insensitive_after_nfkc_and_skips_expired(store: SharedStore, clock: Clock):
    a = store.save(PROJECT, "Run ＰＹＴＥＳＴ with -q").record
    b = store.save(PROJECT, "pytest needs the venv").record
    old = store.save(PROJECT, "old pytest habit").record
    store.save(PROJECT, "new habit", supersedes=old.id)
    store.save(PROJECT, "unrelated")
    g = store.save("global", "pytest in global").record
    clock.advance()
    removed = store.delete_matching(PROJECT, "PyTest")
    assert sorted(r.id for r in removed) == sorted([a.id, b.id])
    remaining = [r.content for r in store.snapshot(PROJECT).records]
    assert remaining == ["old pytest habit", "new habit", "unrelated"]
    assert [r.id for r in store.snapshot("global").records] == [g.id]


def test_delete_matching_with_an_empty_substring_removes_nothing(store: SharedStore):
    store.save("global", "x")
    before = file_of(store, "global").read_bytes()
    assert store.delete_matching("global", "") == []
    assert store.delete_matching("global", "no such text") == []
    assert file_of(store, "global").read_bytes() == before


# -- touches ---------------------------------------------------------------------------------


class CountingStore(SharedStore):
    """Counts rewrites per scope file."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.writes: list[str] = []

    def _write_lines(self, scope, path, lines, **kwargs):
        self.writes.append(scope)
        super()._write_lines(scope, path, lines, **kwargs)


def test_touches_are_coalesced_and_written_once_per_scope_by_flush(store_dir: Path, clock: Clock):
    s = CountingStore(str(store_dir), clock=clock, touch_delay=60.0)
    a = s.save("global", "a").record
    b = s.save("global", "b").record
    p = s.save(PROJECT, "p").record
    s.writes.clear()
    before = Path(s.scope_path("global")).read_bytes()
    s.touch({"global": [a.id, b.id], PROJECT: [p.id]})
    clock.advance(500)
    s.touch({"global": [a.id]})
    clock.advance(500)
    latest = clock.now
    s.touch({"global": [a.id]})
    assert Path(s.scope_path("global")).read_bytes() == before  # nothing written yet
    s.flush()
    assert sorted(s.writes) == sorted(["global", PROJECT])
    by_id = {r.id: r for r in s.snapshot("global").records}
    assert (by_id[a.id].access_count, by_id[a.id].last_accessed_at) == (3, latest)
    assert (by_id[b.id].access_count, by_id[b.id].last_accessed_at) == (1, T0)
    assert s.snapshot(PROJECT).records[0].access_count == 1
    assert by_id[a.id].updated_at == T0  # a touch is not an edit
    s.flush()
    assert len(s.writes) == 2
    s.close()


def test_touches_are_flushed_by_the_background_timer(store_dir: Path, clock: Clock):
    s = SharedStore(str(store_dir), clock=clock, touch_delay=0.1)
    r = s.save("global", "r").record
    s.touch({"global": [r.id]})
    deadline = time.monotonic() + 5
    while s.snapshot("global").records[0].access_count == 0:
        assert time.monotonic() < deadline, "the timer never flushed"
        time.sleep(0.02)
    assert s.snapshot("global").records[0].access_count == 1
    s.close()


def test_touches_of_records_that_are_gone_are_ignored(store_dir: Path, clock: Clock):
    s = CountingStore(str(store_dir), clock=clock, touch_delay=60.0)
    r = s.save("global", "r").record
    s.delete_ids([r.id])
    s.writes.clear()
    s.touch({"global": [r.id], PROJECT: ["00000000-0000-4000-8000-000000000000"]})
    s.flush()
    assert s.writes == []
    s.close()


def test_close_flushes_pending_touches_and_is_idempotent(store_dir: Path, clock: Clock):
    s = SharedStore(str(store_dir), clock=clock, touch_delay=60.0)
    r = s.save("global", "r").record
    s.touch({"global": [r.id]})
    s.close()
    assert s.snapshot("global").records[0].access_count == 1
    s.close()
    s.touch({"global": [r.id]})  # after close a touch is written at once
    assert s.snapshot("global").records[0].access_count == 2


def test_touches_that_cannot_be_written_stay_pending(store_dir: Path, clock: Clock):
    s = SharedStore(str(store_dir), clock=clock, touch_delay=60.0, lock_timeout=0.2)
    r = s.save("global", "r").record
    lock = Path(s.root) / ".locks" / f"{scopes.scope_sha1('global')}.lock"
    lock.write_text(
        json.dumps({"pid": os.getppid(), "host": "other", "createdAt": int(time.time() * 1000)}), encoding="utf-8"
    )
    s.touch({"global": [r.id]})
    s.flush()
    assert s.snapshot("global").records[0].access_count == 0
    lock.unlink()
    s.flush()
    assert s.snapshot("global").records[0].access_count == 1
    s.close()


# -- aliases ---------------------------------------------------------------------------------


def test_aliases_are_registered_pretty_sorted_and_readable(store: SharedStore, store_dir: Path):
    assert store.read_aliases() == {}
    store.register_alias("前端", "project:/home/me/web")
    store.register_alias("api", "project:/home/me/api")
    path = store_dir / "scopes.json"
    text = path.read_text(encoding="utf-8")
    assert (
        text
        == json.dumps(
            {"api": "project:/home/me/api", "前端": "project:/home/me/web"},
            ensure_ascii=False,
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    assert store.read_aliases() == {"api": "project:/home/me/api", "前端": "project:/home/me/web"}
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert tmp_leftovers(store_dir) == []


def test_registering_the_same_alias_again_writes_nothing(store: SharedStore, store_dir: Path):
    store.register_alias("api", "project:/home/me/api")
    before = (store_dir / "scopes.json").stat()
    store.register_alias("api", "project:/home/me/api")
    after = (store_dir / "scopes.json").stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


def test_an_alias_taken_by_another_path_is_scope_name_taken(store: SharedStore, store_dir: Path):
    store.register_alias("api", "project:/home/me/api")
    with pytest.raises(ScopeError) as info:
        store.register_alias("api", "project:/srv/other")
    assert info.value.code == "SCOPE_NAME_TAKEN"
    assert "/home/me/api" in info.value.message and "/srv/other" in info.value.message
    assert store.read_aliases() == {"api": "project:/home/me/api"}


def test_other_entries_of_scopes_json_survive_a_registration(store: SharedStore, store_dir: Path):
    (store_dir / "scopes.json").write_text('{"zeta":"project:/z","meta":{"by":"dsh"}}', encoding="utf-8")
    store.register_alias("alpha", "project:/a")
    data = json.loads((store_dir / "scopes.json").read_text(encoding="utf-8"))
    assert data == {"alpha": "project:/a", "meta": {"by": "dsh"}, "zeta": "project:/z"}
    assert store.read_aliases() == {"alpha": "project:/a", "zeta": "project:/z"}


def test_an_unreadable_scopes_json_reads_as_no_aliases_and_is_never_overwritten(
    store: SharedStore, store_dir: Path, caplog: pytest.LogCaptureFixture
):
    (store_dir / "scopes.json").write_text("{not json", encoding="utf-8")
    assert store.read_aliases() == {}
    assert any("scopes.json" in r.getMessage() for r in caplog.records)
    with pytest.raises(StoreError):
        store.register_alias("api", "project:/home/me/api")
    assert (store_dir / "scopes.json").read_text(encoding="utf-8") == "{not json"


def test_aliases_are_registered_under_the_scopes_json_lock(store_dir: Path):
    s = SharedStore(str(store_dir), lock_timeout=0.2)
    s.prepare()
    lock = store_dir / ".locks" / f"{scopes.scope_sha1('scopes.json')}.lock"
    lock.write_text(
        json.dumps({"pid": os.getppid(), "host": "other", "createdAt": int(time.time() * 1000)}), encoding="utf-8"
    )
    with pytest.raises(LockTimeout):
        s.register_alias("api", "project:/home/me/api")
    assert not (store_dir / "scopes.json").exists()


def test_the_store_never_touches_settings_json(store: SharedStore, store_dir: Path):
    (store_dir / "settings.json").write_text('{"dsh": true}', encoding="utf-8")
    before = (store_dir / "settings.json").stat()
    store.save("global", "x")
    store.register_alias("api", "project:/a")
    store.discover_scopes()
    after = (store_dir / "settings.json").stat()
    assert (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)


# -- insert (import / restore) ---------------------------------------------------------------


def test_insert_writes_records_verbatim_and_skips_known_ids_and_live_duplicate_content(
    store: SharedStore, clock: Clock
):
    kept = store.save(PROJECT, "uses uv for packaging").record
    path = file_of(store, PROJECT)
    with path.open("a", encoding="utf-8") as f:
        f.write("not json\n")
    foreign = (
        f'{{"id":"imp-1","scope":"{PROJECT}","kind":"fact","content":"ruff formats the code","x-other":{{"k":1}}}}'
    )
    expired = records.new_record(scope=PROJECT, content="uses uv for packaging", now=T0 - 10).with_changes(
        expiredAt=T0 - 5
    )
    batch = [
        records.parse_line(foreign),
        records.new_record(scope=PROJECT, content="  uses uv for packaging "),  # live duplicate: skipped
        expired,  # same content but expired: restored
        records.parse_line(foreign),  # same id twice in the batch: skipped
        Record(data=dict(kept.data), raw=kept.raw),  # id already in the scope: skipped
    ]
    assert store.insert(PROJECT, batch) == (2, 3)
    assert lines_of(path) == [kept.raw.encode(), b"not json", foreign.encode(), expired.raw.encode()]
    assert store.insert(PROJECT, batch) == (0, 5)  # nothing added: the file is not rewritten
    assert lines_of(path)[-1] == expired.raw.encode()
    assert tmp_leftovers(Path(store.root)) == []


def test_insert_keeps_duplicate_content_within_one_batch_so_a_restore_is_lossless(store: SharedStore):
    twins = [records.new_record(scope="global", content="same words") for _ in range(2)]
    assert store.insert("global", twins) == (2, 0)
    assert [r.id for r in store.snapshot("global").records] == [t.id for t in twins]
