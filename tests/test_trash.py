"""The trash: a person's forget (the CLI, the page) is restorable for `DSH_MEMORY_TRASH_DAYS` days; an
agent's `memory_forget` still scrubs at once. Real stores in tmp dirs; the CLI in-process."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from dsh_memory_mcp import config
from dsh_memory_mcp.cli import main as cli
from dsh_memory_mcp.errors import StoreError
from dsh_memory_mcp.service import trash
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.store.records import new_record, now_ms
from dsh_memory_mcp.store.shared import SharedStore
from dsh_memory_mcp.store.trash import DAY_MS
from tests.helpers.mcp_session import memory_session

SECRET = "the staging door code is 4711-trash"


def _bytes_everywhere(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def _seed(store: SharedStore, scope: str = "global", content: str = SECRET) -> str:
    """A record with history: created 20 days ago, used 7 times, written by claude-code."""
    now = now_ms()
    old = new_record(scope=scope, content=content, source={"origin": "explicit", "client": "claude-code"})
    old = old.with_changes(createdAt=now - 20 * DAY_MS, accessCount=7)
    assert store.insert(scope, [old]) == (1, 0)
    return old.id


def _cli(store_dir: Path, *args: str) -> int:
    return cli.main([*args, "--store-dir", str(store_dir)])


def test_an_agents_memory_forget_still_scrubs_and_fills_no_trash(store_dir, tmp_path):
    with memory_session(store_dir, project=tmp_path) as s:
        saved = s.call("memory_save", {"content": SECRET, "scope": "global"}).structured_content["id"]
        done = s.call("memory_forget", {"id": saved})
        assert not done.is_error and done.structured_content == {"ok": True, "deleted": 1, "ids": [saved]}
        assert "回收站" not in done.content[0].text
    assert SECRET.encode() not in _bytes_everywhere(store_dir)
    assert not (store_dir / "trash.jsonl").exists()


def test_cli_forget_moves_to_the_trash_and_recover_trash_brings_it_back_with_its_history(store, store_dir, capsys):
    rid = _seed(store)
    assert _cli(store_dir, "forget", rid[:8]) == 0
    out = capsys.readouterr().out
    assert "回收站" in out and "30 天" in out and f"recover --trash {rid[:8]}" in out
    assert _cli(store_dir, "search", "staging door") == 0
    assert rid[:8] not in capsys.readouterr().out
    # Gone from the scope file and the journal; the text lives only in the private trash file.
    assert SECRET.encode() not in (store_dir / "global.jsonl").read_bytes()
    holders = [p for p in store_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert holders == [store_dir / "trash.jsonl"]
    assert stat.S_IMODE(os.stat(store_dir / "trash.jsonl").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store_dir).st_mode) == 0o700

    assert _cli(store_dir, "recover", "--trash") == 0
    listing = capsys.readouterr().out
    assert rid[:8] in listing and "global" in listing and "staging door" in listing
    assert _cli(store_dir, "recover", "--trash", "--json") == 0
    (entry,) = json.loads(capsys.readouterr().out)["entries"]
    assert entry["id"] == rid and entry["client"] == "cli" and entry["content"] == SECRET

    assert _cli(store_dir, "recover", "--trash", rid[:8], "--json") == 0
    (back,) = json.loads(capsys.readouterr().out)["restored"]
    assert back["id"] == rid and back["deduped"] is False
    fresh = SharedStore(str(store_dir))
    (live,) = [r for r in fresh.snapshot("global").records if not r.is_expired(now_ms())]
    assert live.content == SECRET and live.access_count == 7
    assert live.created_at < now_ms() - 19 * DAY_MS
    assert live.data["source"] == {"origin": "explicit", "client": "claude-code"}
    assert fresh.journal.live_entry("global", live.id) is not None  # journalled like any save
    assert fresh.trash.entries(30) == []
    fresh.close()
    assert _cli(store_dir, "recover", "--trash") == 0
    assert "回收站是空的" in capsys.readouterr().out


def test_restoring_a_text_that_is_live_again_dedupes_and_says_so(store, store_dir, capsys):
    rid = _seed(store)
    assert _cli(store_dir, "forget", rid) == 0
    again = store.save("global", SECRET).record
    capsys.readouterr()
    assert _cli(store_dir, "recover", "--trash", rid[:8]) == 0
    assert f"已有相同内容的记忆 {again.short_id}" in capsys.readouterr().out
    assert [r.id for r in SharedStore(str(store_dir)).snapshot("global").records] == [again.id]


def test_purge_and_trash_days_zero_leave_the_text_in_no_file(store, store_dir, monkeypatch, capsys):
    rid = _seed(store)
    assert _cli(store_dir, "forget", rid, "--purge") == 0
    assert "回收站" not in capsys.readouterr().out
    assert SECRET.encode() not in _bytes_everywhere(store_dir)

    other = _seed(store, content=SECRET + " (2)")
    monkeypatch.setenv("DSH_MEMORY_TRASH_DAYS", "0")
    assert _cli(store_dir, "forget", other, "--json") == 0
    assert "trashDays" not in json.loads(capsys.readouterr().out)
    assert SECRET.encode() not in _bytes_everywhere(store_dir)


def test_a_forget_by_query_trashes_every_match_and_empty_purges_them(store, store_dir, capsys):
    ids = {_seed(store, content=f"{SECRET} #{i}") for i in range(3)}
    assert _cli(store_dir, "forget", "--query", "door code", "--scope", "global", "--yes") == 0
    assert _cli(store_dir, "recover", "--trash", "--json") == 0
    capsys.readouterr()
    service = open_service(config.resolve_settings(store_dir=str(store_dir), env={}))
    try:
        assert {e.record.id for e in trash.entries(service)} == ids
    finally:
        close_service(service)
    assert _cli(store_dir, "recover", "--trash", "--empty") == 1  # not a terminal: needs --yes
    assert "--yes" in capsys.readouterr().err
    assert _cli(store_dir, "recover", "--trash", "--empty", "--yes") == 0
    assert "3" in capsys.readouterr().out
    assert SECRET.encode() not in _bytes_everywhere(store_dir)


def test_an_entry_past_the_retention_is_purged_on_the_next_access(store_dir):
    now = [10 * DAY_MS]
    store = SharedStore(str(store_dir), clock=lambda: now[0])
    store.prepare()
    rid = _seed(store)
    store.delete_ids([rid], keep=lambda removed: store.trash.add(removed, "cli", 30))
    assert [e.record.id for e in store.trash.entries(30)] == [rid]
    now[0] += 30 * DAY_MS - 1
    assert [e.record.id for e in store.trash.entries(30)] == [rid]
    now[0] += 1
    assert store.trash.entries(30) == []
    assert SECRET.encode() not in _bytes_everywhere(store_dir)
    store.close()


def test_the_trash_entry_is_written_before_the_record_leaves_its_file(store, store_dir):
    rid = _seed(store)
    seen: list[bytes] = []

    def keep(removed):
        store.trash.add(removed, None, 30)
        seen.append((store_dir / "global.jsonl").read_bytes())

    store.delete_ids([rid], keep=keep)
    assert SECRET.encode() in seen[0]  # still live in its scope file when the trash had it
    assert [e.record.id for e in store.trash.entries(30)] == [rid]


def test_a_corrupt_or_non_utf8_line_is_kept_and_skipped(store, store_dir):
    bad = b'{"id": "broken\n\xff\xfe not utf-8\n'
    (store_dir / "trash.jsonl").write_bytes(bad)
    os.chmod(store_dir / "trash.jsonl", 0o600)
    rid = _seed(store)
    store.delete_ids([rid], keep=lambda removed: store.trash.add(removed, None, 30))
    assert [e.record.id for e in store.trash.entries(30)] == [rid]
    assert store.trash.remove(None, 30)[0].record.id == rid
    assert (store_dir / "trash.jsonl").read_bytes() == bad  # nothing of it dropped


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_trash_file_that_is_a_symlink_or_fifo_is_a_coded_error_and_nothing_is_lost(store, store_dir, tmp_path, kind):
    path = store_dir / "trash.jsonl"
    if kind == "symlink":
        (tmp_path / "elsewhere").write_bytes(b"")
        path.symlink_to(tmp_path / "elsewhere")
    else:
        os.mkfifo(path)
    rid = _seed(store)
    with pytest.raises(StoreError) as caught:
        store.delete_ids([rid], keep=lambda removed: store.trash.add(removed, None, 30))
    assert "回收站文件" in str(caught.value)
    assert [r.id for r in store.snapshot("global").records] == [rid]  # still live: nothing lost


def test_an_english_terminal_says_where_the_memory_went_and_lists_the_trash_in_english(
    store, store_dir, monkeypatch, capsys
):
    monkeypatch.setenv("LANG", "en_US.UTF-8")
    rid = _seed(store)
    assert _cli(store_dir, "forget", rid) == 0
    out = capsys.readouterr().out
    assert "Moved to the trash for 30 days" in out and f"recover --trash {rid[:8]}" in out
    assert _cli(store_dir, "recover", "--trash") == 0
    assert "In the trash: 1 (each kept 30 days" in capsys.readouterr().out
    assert _cli(store_dir, "recover", "--trash", "--empty", "--yes") == 0
    assert capsys.readouterr().out == "Trash emptied: 1 deleted for good\n"
    assert _cli(store_dir, "recover", "deadbeef") == 2  # ids only with --trash
