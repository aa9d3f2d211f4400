"""Hostile files under the store: FIFOs, devices, directories, symlinks, a damaged scopes.json,
and tmp files left by dead writers."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.errors import StoreError
from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.shared import SharedStore

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs, /dev/zero, symlinks")


@posix_only
def test_a_fifo_as_a_scope_file_is_a_store_error_naming_it_not_a_hang(store: SharedStore):
    path = Path(store.scope_path("global"))
    os.mkfifo(path)
    start = time.monotonic()
    with pytest.raises(StoreError) as read:
        store.snapshot("global")
    with pytest.raises(StoreError) as write:
        store.save("global", "x")
    assert time.monotonic() - start < 2.0
    for info in (read, write):
        assert info.value.code == "STORE_ERROR" and str(path) in info.value.message
        assert "命名管道" in info.value.message
    assert path.is_fifo()


@posix_only
def test_a_scope_file_symlinked_to_dev_zero_is_refused_at_once(store: SharedStore):
    path = Path(store.scope_path("global"))
    path.symlink_to("/dev/zero")
    start = time.monotonic()
    with pytest.raises(StoreError) as info:
        store.snapshot("global")
    with pytest.raises(StoreError):
        store.save("global", "x")
    assert time.monotonic() - start < 2.0
    assert str(path) in info.value.message and "设备文件" in info.value.message
    assert os.readlink(path) == "/dev/zero"


def test_a_directory_in_place_of_a_scope_file_is_a_store_error(store: SharedStore):
    path = Path(store.scope_path("project:/x"))
    path.mkdir()
    with pytest.raises(StoreError) as info:
        store.save("project:/x", "x")
    assert str(path) in info.value.message


@posix_only
def test_a_symlinked_scope_file_is_written_through_to_its_target_and_the_link_kept(store: SharedStore, tmp_path: Path):
    elsewhere = tmp_path / "dotfiles" / "global.jsonl"
    elsewhere.parent.mkdir()
    elsewhere.write_text('{"id":"keep-me-1","content":"from before"}\n', encoding="utf-8")
    link = Path(store.scope_path("global"))
    link.symlink_to(elsewhere)
    saved = store.save("global", "written through")
    assert link.is_symlink() and os.readlink(link) == str(elsewhere)
    assert (
        elsewhere.read_text(encoding="utf-8")
        == '{"id":"keep-me-1","content":"from before"}\n' + saved.record.raw + "\n"
    )
    assert [r.id for r in SharedStore(store.root).snapshot("global").records] == ["keep-me-1", saved.record.id]
    assert not [p for p in elsewhere.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_deeply_nested_scopes_json_is_reported_once_never_overwritten_and_refuses_new_aliases(
    store: SharedStore, caplog: pytest.LogCaptureFixture
):
    aliases = Path(store.root) / "scopes.json"
    damaged = ("[" * 100_000 + "]" * 100_000).encode()
    aliases.write_bytes(damaged)
    caplog.set_level(logging.WARNING)
    assert store.read_aliases() == {} and store.read_aliases() == {}
    warnings = [r for r in caplog.records if "scopes.json" in r.getMessage()]
    assert len(warnings) == 1 and "嵌套过深" in warnings[0].getMessage()
    problem = store.aliases_problem()
    assert problem is not None and str(aliases) in problem
    with pytest.raises(StoreError) as info:
        store.register_alias("team", "project:/x")
    assert info.value.code == "STORE_ERROR" and "未登记别名" in info.value.message
    assert aliases.read_bytes() == damaged


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_tmp_files_of_dead_writers_are_removed_at_start_and_only_ours(store_dir: Path):
    store = SharedStore(str(store_dir))
    store.prepare()
    projects = store_dir / "projects"
    dead = projects / f".{'a' * 40}.jsonl.{_dead_pid()}-{fileio.HOST_TAG}.abcdefgh.tmp"
    live = projects / f".{'a' * 40}.jsonl.{os.getppid()}-{fileio.HOST_TAG}.abcdefgh.tmp"
    foreign_old = store_dir / ".global.jsonl.123-00000000.zzzzzzzz.tmp"
    foreign_new = store_dir / ".global.jsonl.124-00000000.zzzzzzzz.tmp"
    legacy_old = store_dir / ".global.jsonl.k3j4h5g6.tmp"
    dsh_fixed = store_dir / "global.jsonl.tmp"  # the DSH plugin's own tmp: never ours to remove
    for path in (dead, live, foreign_old, foreign_new, legacy_old, dsh_fixed):
        path.write_bytes(b"partial")
    hour_and_more = time.time() - 2 * 3600
    for path in (foreign_old, legacy_old):
        os.utime(path, (hour_and_more, hour_and_more))
    assert sorted(store.leftover_tmps()) == sorted(map(str, (dead, foreign_old, legacy_old)))
    assert dead.exists()  # reporting them removes nothing
    SharedStore(str(store_dir)).prepare()
    assert not dead.exists() and not foreign_old.exists() and not legacy_old.exists()
    assert live.exists() and foreign_new.exists() and dsh_fixed.exists()


def test_tmp_files_of_dead_writers_are_removed_on_the_next_locked_write(store: SharedStore):
    projects = Path(store.root) / "projects"
    dead = projects / f".{'b' * 40}.jsonl.{_dead_pid()}-{fileio.HOST_TAG}.abcdefgh.tmp"
    dead.write_bytes(b"partial")
    store.save("project:/somewhere", "a write in projects/")
    assert not dead.exists()
