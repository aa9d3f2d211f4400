"""Our whole-file rewrites never erase what a writer that ignores the lock appended or changed.

Real foreign processes, no lock: an O_APPEND appender (an old plugin adding lines) and a DSH-style
snapshot rewriter (read, add a line, tmp + rename), each running while this process forgets in a
loop; and a same-size in-place edit that restores the mtime.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.errors import StoreError
from dsh_memory_mcp.store import records
from dsh_memory_mcp.store.records import Record, parse_lines
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, subprocess_env

_FOREIGN = """
import json, os, sys, time
path, mode, prefix, count, pause = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
for i in range(count):
    line = json.dumps({"id": f"{prefix}-{i}", "scope": "global", "kind": "note", "content": f"foreign {prefix} {i}",
                       "tags": [], "source": {"origin": "dsh"}, "createdAt": 1, "updatedAt": 1,
                       "lastAccessedAt": 1, "accessCount": 0}) + "\\n"
    if mode == "append":
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, line.encode())
        os.close(fd)
    else:  # a snapshot rewrite: read, add, tmp + rename (DSH's way)
        with open(path, "rb") as f:
            data = f.read()
        with open(path + ".tmp", "wb") as f:
            f.write(data + line.encode())
        os.replace(path + ".tmp", path)
    time.sleep(pause)
"""


def fill(store: SharedStore, n: int) -> list[str]:
    made = [records.new_record(scope="global", content=f"our memory {i} " + "x" * 120, now=1000 + i) for i in range(n)]
    Path(store.scope_path("global")).write_bytes(records.render_bytes(made))
    return [r.id for r in made]


def file_ids(store: SharedStore) -> set[str]:
    text = Path(store.scope_path("global")).read_text(encoding="utf-8")
    return {line.id for line in parse_lines(text) if isinstance(line, Record)}


@pytest.mark.parametrize(("mode", "pause", "said"), [("append", 0.005, "追加了"), ("rewrite", 0.01, "重做")])
def test_a_forget_loop_beside_an_unlocked_writer_loses_none_of_its_lines(
    store: SharedStore, caplog: pytest.LogCaptureFixture, mode: str, pause: float, said: str
):
    ours = fill(store, 3000)
    caplog.set_level(logging.WARNING)
    count = 150
    with subprocess.Popen(
        [PYTHON, "-c", _FOREIGN, store.scope_path("global"), mode, "foreign", str(count), str(pause)],
        env=subprocess_env(),
    ) as proc:
        try:
            for rid in ours:
                # Against a rewriter as fast as our own rewrite, a forget may give up (a coded
                # error, nothing written): that is allowed here; losing a foreign line is not.
                with contextlib.suppress(StoreError):
                    store.delete_ids([rid])
                if proc.poll() is not None:
                    break
        finally:
            proc.wait(timeout=60)
    assert proc.returncode == 0
    lost = {f"foreign-{i}" for i in range(count)} - file_ids(store)
    assert lost == set(), f"{len(lost)} of {count} foreign lines erased"
    assert any(said in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_a_same_size_edit_in_place_with_its_mtime_restored_is_never_reverted_by_a_forget(
    store: SharedStore, caplog: pytest.LogCaptureFixture
):
    a = store.save("global", "the meeting is on monday").record
    b = store.save("global", "something to forget").record
    store.snapshot("global")  # cached
    path = Path(store.scope_path("global"))
    before = os.stat(path)
    edited = path.read_bytes().replace(b"on monday", b"on friday")
    with open(path, "r+b") as f:  # in place: same inode, same size
        f.write(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    caplog.set_level(logging.WARNING)
    assert [r.id for r in store.delete_ids([b.id])] == [b.id]
    text = path.read_text(encoding="utf-8")
    assert "on friday" in text and "on monday" not in text and b.id not in text and a.id in text
    assert json.loads(text.splitlines()[0])["content"] == "the meeting is on friday"
    # Seen by the read (the change time moved) or, within one tick of the file clock, by the
    # pre-rename check, which then says so and redoes the forget on the edited content.


def test_a_search_after_a_same_size_edit_in_place_with_its_mtime_restored_sees_the_new_text(
    store_dir: Path, tmp_path: Path
):
    from tests.helpers.services import make_service

    service = make_service(store_dir, tmp_path)
    try:
        service.call("memory_save", {"content": "the release train leaves on monday", "scope": "global"})
        assert service.call("memory_search", {"query": "monday", "scope": "global"}).structured["count"] == 1
        path = Path(service.store.scope_path("global"))
        before = os.stat(path)
        time.sleep(0.05)  # file times tick coarsely (a few ms): the edit must come at a later tick
        edited = path.read_bytes().replace(b"on monday", b"on sunday")
        with open(path, "r+b") as f:
            f.write(edited)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert service.call("memory_search", {"query": "sunday", "scope": "global"}).structured["count"] == 1
        assert service.call("memory_search", {"query": "monday", "scope": "global"}).structured["count"] == 0
    finally:
        service.store.close()
