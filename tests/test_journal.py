"""The write journal: acknowledged saves and removals, durable, private, bounded, read by any process."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from dsh_memory_mcp.store.journal import Journal
from tests.conftest import subprocess_env


def test_a_saved_record_stays_live_until_it_is_forgotten_or_superseded(tmp_path: Path):
    journal = Journal(str(tmp_path))
    journal.saved("global", [("a", '{"id":"a"}'), ("b", '{"id":"b"}'), ("c", '{"id":"c"}')])
    journal.removed("global", ["a"], op="forget")
    journal.removed("global", ["b"], op="supersede")
    journal.refresh()
    assert sorted(journal.live("global")) == ["c"]
    assert [e.line for e in journal.missing("global", present=[])] == ['{"id":"c"}']
    assert journal.missing("global", present=["c"]) == []


def test_the_journal_is_private_and_one_line_per_entry(tmp_path: Path):
    journal = Journal(str(tmp_path))
    journal.saved("project:/x", [("a", '{"id":"a","content":"中文"}')])
    folder = tmp_path / ".journal"
    (segment,) = folder.iterdir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(segment.stat().st_mode) == 0o600
    assert segment.read_text(encoding="utf-8").count("\n") == 1


def test_another_process_sees_what_was_journalled_and_a_torn_last_line_waits(tmp_path: Path):
    code = (
        "import sys; from dsh_memory_mcp.store.journal import Journal; "
        "Journal(sys.argv[1]).saved('global', [('x1', '{\"id\":\"x1\"}')])"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=subprocess_env(), check=True, timeout=60)
    (segment,) = (tmp_path / ".journal").iterdir()
    with open(segment, "ab") as f:
        f.write(b'{"t":1,"op":"save","scope":"global","id":"x2","line":"{}')  # a writer killed mid-line
    journal = Journal(str(tmp_path))
    journal.refresh()
    assert sorted(journal.live("global")) == ["x1"]


def test_old_and_excess_segments_are_pruned_but_never_the_newest(tmp_path: Path):
    journal = Journal(str(tmp_path), max_bytes=2000, segment_bytes=500)
    folder = tmp_path / ".journal"
    folder.mkdir(mode=0o700)
    (folder / "20000101.ndjson").write_text('{"t":1,"op":"save","scope":"global","id":"old","line":"{}"}\n')
    for i in range(40):
        journal.saved("global", [(f"id-{i}", f'{{"id":"id-{i}","pad":"{"x" * 40}"}}')])
    journal.prune()
    names = sorted(os.listdir(folder))
    assert "20000101.ndjson" not in names
    assert sum((folder / n).stat().st_size for n in names) <= 2000 + 500
    journal.refresh()
    assert "id-39" in journal.live("global") and "old" not in journal.live("global")


def test_segments_of_past_days_keep_only_the_saves_that_are_still_live(tmp_path: Path):
    folder = tmp_path / ".journal"
    folder.mkdir(mode=0o700)
    (folder / "20000101.ndjson").write_text(
        '{"t":1,"op":"save","scope":"global","id":"kept","line":"{\\"id\\":\\"kept\\"}"}\n'
        '{"t":2,"op":"save","scope":"global","id":"secret","line":"{\\"id\\":\\"secret\\",\\"content\\":\\"pin 1234\\"}"}\n'
        '{"t":3,"op":"forget","scope":"global","ids":["secret"]}\n'
    )
    journal = Journal(str(tmp_path), max_age=1e6)
    journal.saved("global", [("today", '{"id":"today"}')])
    journal.prune()
    old = (folder / "20000101.ndjson").read_text()
    assert "pin 1234" not in old and '"kept"' in old
    fresh = Journal(str(tmp_path))
    fresh.refresh()
    assert sorted(fresh.live("global")) == ["kept", "today"]
