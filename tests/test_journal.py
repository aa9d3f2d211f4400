"""The write journal: acknowledged saves and removals, durable, private, bounded, read by any process."""

from __future__ import annotations

import hashlib
import json
import os
import select
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_memory_mcp.store.journal import Entry, Journal
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, subprocess_env
from tests.helpers.mcp_session import server_params, stdio_session


def _live(journal: Journal, scope: str) -> dict[str, Entry]:
    return {entry.id: entry for entry in journal.live_entries(scope)[0]}


def test_a_saved_record_stays_live_until_it_is_forgotten_or_superseded(tmp_path: Path):
    journal = Journal(str(tmp_path))
    journal.saved("global", [("a", '{"id":"a"}'), ("b", '{"id":"b"}'), ("c", '{"id":"c"}')])
    journal.removed("global", ["a"], op="forget")
    journal.removed("global", ["b"], op="supersede")
    journal.refresh()
    assert sorted(_live(journal, "global")) == ["c"]
    assert _live(journal, "global")["c"].line == '{"id":"c"}'


def test_the_journal_is_private_and_one_line_per_entry(tmp_path: Path):
    journal = Journal(str(tmp_path))
    journal.saved("project:/x", [("a", '{"id":"a","content":"中文"}')])
    folder = tmp_path / ".journal"
    (segment,) = folder.iterdir()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(segment.stat().st_mode) == 0o600
    assert len([line for line in segment.read_text(encoding="utf-8").split("\n") if line.strip()]) == 1


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
    assert sorted(_live(journal, "global")) == ["x1"]


def test_old_and_excess_segments_are_pruned_but_never_the_newest(tmp_path: Path):
    journal = Journal(str(tmp_path), max_bytes=2000, segment_bytes=500)
    folder = tmp_path / ".journal"
    folder.mkdir(mode=0o700)
    (folder / "20000101.ndjson").write_text('{"t":1,"op":"save","scope":"global","id":"old","line":"{}"}\n', encoding="utf-8")
    for i in range(40):
        journal.saved("global", [(f"id-{i}", f'{{"id":"id-{i}","pad":"{"x" * 40}"}}')])
    journal.prune()
    names = sorted(os.listdir(folder))
    assert "20000101.ndjson" not in names
    assert sum((folder / n).stat().st_size for n in names) <= 2000 + 500
    journal.refresh()
    assert "id-39" in _live(journal, "global") and "old" not in _live(journal, "global")


def test_segments_of_past_days_keep_only_the_saves_that_are_still_live(tmp_path: Path):
    folder = tmp_path / ".journal"
    folder.mkdir(mode=0o700)
    (folder / "20000101.ndjson").write_text(
        '{"t":1,"op":"save","scope":"global","id":"kept","line":"{\\"id\\":\\"kept\\"}"}\n'
        '{"t":2,"op":"save","scope":"global","id":"secret","line":"{\\"id\\":\\"secret\\",\\"content\\":\\"pin 1234\\"}"}\n'
        '{"t":3,"op":"forget","scope":"global","ids":["secret"]}\n'
    , encoding="utf-8")
    os.utime(folder / "20000101.ndjson", (946684800, 946684800))  # really written that day
    journal = Journal(str(tmp_path), max_age=1e6)
    journal.saved("global", [("today", '{"id":"today"}')])
    journal.prune()
    old = (folder / "20000101.ndjson").read_text(encoding="utf-8")
    assert "pin 1234" not in old and '"kept"' in old
    fresh = Journal(str(tmp_path))
    fresh.refresh()
    assert sorted(_live(fresh, "global")) == ["kept", "today"]


# -- removed text leaves the journal at once -----------------------------------------------------


def files_holding(root: Path, needle: str) -> list[str]:
    """Every file under `root` whose bytes hold `needle` (raw UTF-8 or JSON-escaped)."""
    forms = {needle.encode("utf-8"), json.dumps(needle)[1:-1].encode("ascii"), json.dumps(json.dumps(needle))[3:-3].encode()}
    hits = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if any(form in data for form in forms):
                hits.append(str(path.relative_to(root)))
    return hits


def test_forgotten_text_is_in_no_file_under_the_store_nor_in_the_log(tmp_path: Path, store_dir: Path):
    state = tmp_path / "state"
    params = server_params(store_dir, project=tmp_path, cwd=tmp_path, DSH_MEMORY_DEBUG="1", XDG_STATE_HOME=str(state))
    forgotten = [f"被遗忘的记忆 {i}:蓝色河马在第 {i} 号仓库里弹琵琶" for i in range(12)]
    kept = "留下的记忆:绿色袋鼠喜欢吃火锅"
    with stdio_session(params, tmp_path / "err.log") as s:
        saved = [s.call("memory_save", {"content": text, "kind": "rule", "importance": 0.9}) for text in forgotten]
        scope = saved[0].structured_content["scope"]
        s.call("memory_save", {"content": kept, "scope": "global"})
        for answer in saved[:6]:
            assert s.call("memory_forget", {"id": answer.structured_content["id"]}).structured_content["deleted"] == 1
        answer = s.call("memory_forget", {"query": "蓝色河马", "scope": scope, "confirm": True}).structured_content
        assert answer["deleted"] == 6
    for text in forgotten:
        assert files_holding(store_dir, text) == [], text
        assert files_holding(state, text) == [], text
    assert (tmp_path / "err.log").read_text(encoding="utf-8").count("蓝色河马") == 0
    journal_files = [str(p.relative_to(store_dir)) for p in (store_dir / ".journal").glob("*.ndjson")]
    assert sorted(files_holding(store_dir, kept)) == sorted(["global.jsonl", *journal_files])  # the grep works


def test_a_superseded_record_keeps_its_text_in_its_scope_file_only(store: SharedStore, store_dir: Path):
    old = store.save("global", "旧的说法:部署在周五").record
    store.save("global", "新的说法:部署在周一", supersedes=old.id)
    assert files_holding(store_dir, "旧的说法:部署在周五") == ["global.jsonl"]  # expired there, not in the journal
    journal = Journal(str(store_dir))
    journal.refresh()
    assert old.id not in _live(journal, "global")
    lines = [json.loads(line) for p in (store_dir / ".journal").glob("*.ndjson") for line in p.read_text(encoding="utf-8").split("\n") if line.strip()]
    (scrubbed,) = [item for item in lines if item.get("id") == old.id]
    assert scrubbed["scrubbed"] == "supersede" and "line" not in scrubbed
    assert scrubbed["sha256"] == hashlib.sha256(old.raw.encode("utf-8")).hexdigest()


def test_a_journal_of_an_older_version_with_forgotten_text_is_scrubbed_at_the_next_start(store_dir: Path):
    folder = store_dir / ".journal"
    folder.mkdir(parents=True, mode=0o700)
    today = time.strftime("%Y%m%d", time.gmtime())
    line = json.dumps({"id": "old-1", "scope": "global", "content": "旧版本留下的明文"}, ensure_ascii=False)
    segment = folder / f"{today}.ndjson"
    segment.write_text(
        json.dumps({"t": 1, "op": "save", "scope": "global", "id": "old-1", "line": line}, ensure_ascii=False)
        + "\n"
        + json.dumps({"t": 2, "op": "forget", "scope": "global", "ids": ["old-1"]})
        + "\n",
        encoding="utf-8",
    )
    size = segment.stat().st_size
    SharedStore(str(store_dir)).prepare()  # tidies the journal in the background
    deadline = time.monotonic() + 30
    while files_holding(store_dir, "旧版本留下的明文") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert files_holding(store_dir, "旧版本留下的明文") == []
    assert segment.stat().st_size == size  # overwritten in place, same length: offsets stay valid


def test_many_saves_and_forgets_leave_no_forgotten_text_in_the_journal(store: SharedStore, store_dir: Path):
    for i in range(300):
        rid = store.save("global", f"ephemeral-{i:04d}-text").record.id
        store.delete_ids([rid])
    data = b"".join(p.read_bytes() for p in (store_dir / ".journal").glob("*.ndjson"))
    assert data.count(b"ephemeral-") == 0
    assert data.count(b'"scrubbed": "forget"') == 300


# -- segments that are not regular files ---------------------------------------------------------


def today_segment(store_dir: Path) -> Path:
    return store_dir / ".journal" / f"{time.strftime('%Y%m%d', time.gmtime())}.ndjson"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_at_todays_segment_neither_hangs_saves_nor_keeps_the_server_from_exiting(tmp_path: Path, store_dir: Path):
    (store_dir / ".journal").mkdir(parents=True, mode=0o700)
    os.mkfifo(today_segment(store_dir), 0o600)
    with subprocess.Popen(
        [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(store_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    ) as proc:
        try:
            answers = exchange(
                proc,
                [
                    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    *(
                        {
                            "jsonrpc": "2.0",
                            "id": 2 + i,
                            "method": "tools/call",
                            "params": {"name": "memory_save", "arguments": {"content": f"saved beside a FIFO {i}"}},
                        }
                        for i in range(3)
                    ),
                ],
                expect=4,
            )
            for answer in answers[1:]:
                assert answer["result"]["structuredContent"]["ok"] is True, answer
            _, err = proc.communicate(timeout=30)  # stdin EOF: the server must exit by itself
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0
    stderr = err.decode("utf-8")
    assert stderr.count("不可用") == 1 and today_segment(store_dir).name in stderr
    journal = Journal(str(store_dir))
    journal.refresh()
    assert len(_live(journal, "global")) == 3  # journalled in the next segment: still protected
    assert stat.S_ISFIFO(os.lstat(today_segment(store_dir)).st_mode)  # left alone


INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}


def exchange(proc: subprocess.Popen[bytes], messages: list[dict], *, expect: int, timeout: float = 30.0) -> list[dict]:
    """Send all JSON-RPC lines at once (pipelined, as a host may) and return the `expect` answers by id.

    Reads the pipe's descriptor itself: `select` on the descriptor and then `readline()` on the buffered
    file loses lines, since one `readline()` may pull two answers into Python's buffer while `select` only
    sees the now-empty pipe (the "lost answer" once noted in AGENTS.md was that, not the server)."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join((json.dumps(message) + "\n").encode("utf-8") for message in messages))
    proc.stdin.flush()
    answers: list[dict] = []
    pending = b""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    while len(answers) < expect:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no answer within {timeout} s (got {len(answers)} of {expect})"
        chunk = os.read(fd, 65536)
        assert chunk, "the server closed its output"
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            item = json.loads(line)
            if "id" in item and ("result" in item or "error" in item):
                answers.append(item)
    assert len(answers) == expect, answers
    return sorted(answers, key=lambda a: a["id"])


def test_a_directory_or_symlink_at_todays_segment_is_skipped_for_the_next_one(store_dir: Path):
    store = SharedStore(str(store_dir))
    store.prepare()
    (store_dir / ".journal").mkdir(mode=0o700, exist_ok=True)
    today_segment(store_dir).mkdir()
    outside = store_dir.parent / "elsewhere.ndjson"
    outside.write_text("", encoding="utf-8")
    first_next = today_segment(store_dir).with_name(today_segment(store_dir).name.replace(".ndjson", ".1.ndjson"))
    first_next.symlink_to(outside)
    rid = store.save("global", "journalled past a directory and a symlink").record.id
    assert outside.read_text(encoding="utf-8") == ""  # never written through the link
    journal = Journal(str(store_dir))
    journal.refresh()
    assert rid in _live(journal, "global")


def test_todays_segment_turned_into_a_directory_after_it_was_written_is_skipped_and_saves_succeed(
    store: SharedStore, store_dir: Path, caplog: pytest.LogCaptureFixture
):
    store.save("global", "before the directory")
    segment = today_segment(store_dir)
    segment.rename(segment.with_name("moved-away"))
    segment.mkdir()  # the segment a writer appends to (number 0 of today) is now a directory
    caplog.set_level("WARNING")
    ids = [store.save("global", f"after the directory {i}").record.id for i in range(3)]
    warned = [r.getMessage() for r in caplog.records if segment.name in r.getMessage()]
    assert len(warned) == 1 and "不可用" in warned[0]
    journal = Journal(str(store_dir))
    journal.refresh()
    assert set(ids) <= set(_live(journal, "global"))  # journalled in the next segment: still protected
    assert segment.is_dir()  # left alone
