"""A big store costs what changed: per save no pass over every record, the loss check included,
and many writers at once get through the lock without timing out."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import pytest

from dsh_memory_mcp.store import records, scopes
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, subprocess_env

BIG = 20_000


def fill(store_dir: Path, scope: str, n: int) -> list[str]:
    """Write `n` records of `scope` straight into its file, as DSH would have; their ids."""
    path = store_dir / scopes.scope_file_relpath(scope)
    path.parent.mkdir(parents=True, exist_ok=True)
    made = [
        records.new_record(scope=scope, content=f"record {i} 部署流水线 {i % 97}", now=1_700_000_000_000 + i)
        for i in range(n)
    ]
    path.write_text("".join(r.raw + "\n" for r in made), encoding="utf-8")
    return [r.id for r in made]


def test_saves_at_a_large_store_check_only_what_changed_and_never_index_every_id_again(store_dir: Path):
    fill(store_dir, scopes.GLOBAL, BIG)
    theirs = SharedStore(str(store_dir))  # another process's view of the same store
    theirs.prepare()
    for i in range(100):  # the journal holds live saves the loss check must look up
        theirs.save("global", f"journalled {i}")
    ours = SharedStore(str(store_dir))
    ours.snapshot("global")  # the first read of the scope
    ours.save("global", "first save: builds the dedupe index once")
    start = ours.counters()
    assert start["loss_checks_full"] == 1  # the first look at the scope checks everything once
    for i in range(30):
        ours.save("global", f"ours {i}")
        theirs.save("global", f"theirs {i}")  # an append by another writer, seen on the next read
        assert len(ours.snapshot("global").records) == BIG + 100 + 1 + 2 * (i + 1)
    end = ours.counters()
    assert end["loss_checks_full"] == start["loss_checks_full"]
    assert end["loss_checks_incremental"] - start["loss_checks_incremental"] >= 30
    assert end["parses"] == start["parses"]  # only the appended tails were read
    assert end["extends"] - start["extends"] >= 30
    assert end["id_index_builds"] == start["id_index_builds"]
    assert end["content_index_builds"] == start["content_index_builds"]


def test_an_unlocked_rewrite_at_a_large_store_is_still_checked_in_full_and_the_loss_reported(
    store_dir: Path, caplog: pytest.LogCaptureFixture
):
    fill(store_dir, scopes.GLOBAL, BIG)
    ours = SharedStore(str(store_dir))
    ours.prepare()
    kept = ours.save("global", "kept").record
    erased = ours.save("global", "erased by a stale snapshot").record
    ours.snapshot("global")
    full = ours.counters()["loss_checks_full"]
    path = Path(ours.scope_path("global"))
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    tmp = path.with_name("global.jsonl.dsh-tmp")
    tmp.write_text("".join(line for line in lines if erased.id not in line), encoding="utf-8")
    os.replace(tmp, path)  # DSH's way: a whole new file from an old snapshot, no lock
    caplog.set_level(logging.WARNING)
    snap = ours.snapshot("global")
    assert ours.counters()["loss_checks_full"] == full + 1
    assert kept.id in {r.id for r in snap.records[-3:]}
    said = [r.getMessage() for r in caplog.records if "recover" in r.getMessage()]
    assert len(said) == 1 and "少了 1 条" in said[0]
    assert [e.id for e in ours.missing()["global"]] == [erased.id]


def test_a_rewrite_by_this_process_carries_the_loss_check_on_and_a_later_loss_is_still_found(
    store_dir: Path, caplog: pytest.LogCaptureFixture
):
    fill(store_dir, scopes.GLOBAL, 2_000)
    ours = SharedStore(str(store_dir), touch_interval=0.0)
    ours.prepare()
    first = ours.save("global", "first").record
    ours.snapshot("global")
    full = ours.counters()["loss_checks_full"]
    ours.touch({"global": [first.id]})
    ours.flush()  # a whole-file replace by this process, from a version read under the lock
    gone = ours.save("global", "soon gone").record
    assert ours.snapshot("global").records[-1].id == gone.id
    assert ours.counters()["loss_checks_full"] == full  # our own rewrite needs no full check
    path = Path(ours.scope_path("global"))
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(gone.raw + "\n", ""), encoding="utf-8")  # in place, shorter: not a growth
    caplog.set_level(logging.WARNING)
    ours.snapshot("global")
    assert ours.counters()["loss_checks_full"] == full + 1
    assert any("少了 1 条" in r.getMessage() for r in caplog.records)
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[-1])["id"] == first.id


def test_a_refresh_opens_only_the_journal_segments_that_changed(store_dir: Path):
    ours = SharedStore(str(store_dir))
    ours.prepare()
    ours.journal.segment_bytes = 2_000  # a new segment every few saves: a journal of many files
    for i in range(60):
        ours.save("global", f"early {i}")
    segments = [n for n in os.listdir(store_dir / ".journal") if n.endswith(".ndjson")]
    assert len(segments) >= 10, segments
    theirs = SharedStore(str(store_dir))
    theirs.snapshot("global")  # reads the whole journal once
    before = theirs.counters()["journal_segment_reads"]
    assert before >= len(segments)
    for i in range(5):
        ours.save("global", f"late {i}")  # each grows the newest segment or opens the next one
        snap = theirs.snapshot("global")
        assert snap.records[-1].content == f"late {i}"
    grown = theirs.counters()["journal_segment_reads"] - before
    assert 5 <= grown <= 10, grown  # the newest one or two per save, not the dozen old ones
    theirs.snapshot("global")
    theirs.journal.refresh()
    assert theirs.counters()["journal_segment_reads"] - before == grown  # nothing changed: no open


def test_a_version_met_while_another_thread_checks_is_covered_by_the_next_check(
    store_dir: Path, caplog: pytest.LogCaptureFixture
):
    """Threads that meet a new version while one of them checks it go on unchecked; the loss in
    the version they skipped is still found (and said once) by the next look at the scope."""
    import threading

    fill(store_dir, scopes.GLOBAL, 500)
    ours = SharedStore(str(store_dir))
    ours.prepare()
    first = ours.save("global", "erased first").record
    second = ours.save("global", "erased second").record
    ours.snapshot("global")
    path = Path(ours.scope_path("global"))

    def erase(record_id: str) -> None:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        tmp = path.with_name("global.jsonl.dsh-tmp")
        tmp.write_text("".join(line for line in lines if record_id not in line), encoding="utf-8")
        os.replace(tmp, path)  # an unlocked writer's whole new file

    reporting, release = threading.Event(), threading.Event()

    class Stall(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:  # the checking thread, mid-check
            if "recover" in record.getMessage() and not reporting.is_set():
                reporting.set()
                release.wait(30)

    stall = Stall(level=logging.WARNING)
    logging.getLogger("dsh_memory_mcp").addHandler(stall)
    caplog.set_level(logging.WARNING)
    try:
        erase(first.id)
        checker = threading.Thread(target=ours.snapshot, args=("global",))
        checker.start()
        assert reporting.wait(30)
        erase(second.id)  # a version the checking thread will not look at
        skipped = ours.counters()["loss_checks_skipped"]
        assert second.id not in {r.id for r in ours.snapshot("global").records}
        assert ours.counters()["loss_checks_skipped"] == skipped + 1
        release.set()
        checker.join(30)
    finally:
        release.set()
        logging.getLogger("dsh_memory_mcp").removeHandler(stall)
    ours.snapshot("global")  # the next look checks the version that was skipped
    said = [r.getMessage() for r in caplog.records if "recover" in r.getMessage()]
    assert len(said) == 2 and "少了 1 条" in said[0] and "少了 2 条" in said[1], said
    assert sorted(e.id for e in ours.missing()["global"]) == sorted([first.id, second.id])
    ours.snapshot("global")
    assert len([r for r in caplog.records if "recover" in r.getMessage()]) == 2  # said once each


def _dsh_line(scope: str, content: str, *, ascii_only: bool = False, rid: str = "dsh-0001") -> str:
    """A record line as another writer may spell it (`ascii_only`: every non-ASCII character as ``\\u``)."""
    data = {"id": rid, "scope": scope, "kind": "note", "content": content, "tags": [], "createdAt": 1_700_000_000_000}
    text = json.dumps(data, ensure_ascii=ascii_only, separators=(",", ":"))
    return text + "\n"


#: Records already in global for the dedupe tests: one path whatever the file's size.
SOME = 500


def _append(store_dir: Path, line: str) -> None:
    with (store_dir / "global.jsonl").open("a", encoding="utf-8") as f:
        f.write(line)


@pytest.mark.parametrize("saved_before", [False, True], ids=["first-save", "after-a-save"])
@pytest.mark.parametrize(
    ("spelled", "content"),
    [
        pytest.param({"ascii_only": True}, "部署用 uv,不用 pip", id="unicode-escapes"),
        pytest.param({"ascii_only": True}, "uv 部署 pip", id="unicode-escapes-inside"),
        pytest.param({"slash": True}, "docs at a/b/c", id="escaped-slash"),
        pytest.param({}, "record 7 部署流水线 7", id="plain-duplicate"),
    ],
)
def test_a_duplicate_however_another_writer_spelled_it_is_still_deduped(
    store_dir: Path, spelled: dict[str, bool], content: str, saved_before: bool
):
    fill(store_dir, scopes.GLOBAL, SOME)
    ours = SharedStore(str(store_dir))
    ours.prepare()
    if saved_before:  # the scope is read and cached: the other writer's line arrives as a tail
        assert not ours.save("global", "第一条 the first save").deduped
    line = _dsh_line("global", content, ascii_only=spelled.get("ascii_only", False), rid="dsh-escaped")
    if spelled.get("slash"):
        line = line.replace("/", "\\/")  # legal JSON, and what some serializers write
    if content.startswith("record 7"):
        line = ""  # `fill` wrote it already
    _append(store_dir, line)
    result = ours.save("global", content)
    assert result.deduped, result
    assert result.record.content == content
    if line:
        assert result.record.id == "dsh-escaped"


@pytest.mark.parametrize(
    ("stored", "saved"),
    [
        pytest.param("  两头有空格 spaces at both ends  ", "两头有空格 spaces at both ends", id="spaces"),
        pytest.param("中文结尾是全角空格\u3000", "中文结尾是全角空格", id="ideographic-space"),
        pytest.param("\u00a0nbsp 开头", "nbsp 开头", id="nbsp"),
        pytest.param("\u2028行分隔符 line separator\u2029", "行分隔符 line separator", id="line-separators"),
        pytest.param("\n\t缩进 indented\r\n", "缩进 indented", id="escaped-whitespace"),
        pytest.param(
            "结尾换行 a trailing newline\n", "结尾换行 a trailing newline", id="escaped-whitespace-at-the-end"
        ),
        pytest.param('引号 "quoted" 和反斜杠 \\ inside', '引号 "quoted" 和反斜杠 \\ inside', id="escapes-inside"),
        pytest.param("多行\n第二行 second line", "多行\n第二行 second line", id="multi-line"),
        pytest.param("结尾反斜杠 ends with a backslash\\", "结尾反斜杠 ends with a backslash\\", id="backslash-end"),
    ],
)
def test_a_save_dedupes_against_any_spelling_of_the_stripped_text(store_dir: Path, stored: str, saved: str):
    fill(store_dir, scopes.GLOBAL, SOME)
    _append(store_dir, _dsh_line("global", stored, rid="dsh-stored"))
    ours = SharedStore(str(store_dir))
    ours.prepare()
    assert not ours.save("global", "第一条 the first save").deduped
    result = ours.save("global", saved)
    assert result.deduped and result.record.id == "dsh-stored", result


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(
            '{"id":"dsh-spaced","scope":"global","kind":"note","content" : "空格隔开的键 spaced key"}\n',
            id="spaced-key",
        ),
        pytest.param(
            '{"id":"dsh-spaced","scope":"global","kind":"note","content":"空格隔开的键 spaced key","tags":["content"]}\n',
            id="tag-named-content",
        ),
    ],
)
def test_a_duplicate_in_a_line_another_writer_formatted_otherwise_is_deduped(store_dir: Path, line: str):
    fill(store_dir, scopes.GLOBAL, SOME)
    _append(store_dir, line)
    ours = SharedStore(str(store_dir))
    ours.prepare()
    result = ours.save("global", "空格隔开的键 spaced key")
    assert result.deduped and result.record.id == "dsh-spaced"


@pytest.mark.parametrize("read_meanwhile", [False, True], ids=["appended", "appended-and-read-by-another-thread"])
def test_a_duplicate_appended_while_the_save_waits_for_the_lock_is_seen(store_dir: Path, read_meanwhile: bool):
    """The save read the scope before the lock; another writer appends the same text while it
    waits (and, `read_meanwhile`, another thread of the process reads that version into the
    cache first). The decision is taken again on the content read inside the lock."""
    import threading

    fill(store_dir, scopes.GLOBAL, SOME)
    ours = SharedStore(str(store_dir))
    ours.prepare()
    other = SharedStore(str(store_dir))
    content = "写在读取之后、锁之前的一条 appended before the lock"
    results: list[object] = []
    at_lock = threading.Event()
    tidy = ours.journal.tidy

    def tidied() -> None:  # the last step of a transaction before it takes the lock
        tidy()
        at_lock.set()

    ours.journal.tidy = tidied  # type: ignore[method-assign]
    with other.lock("global"):
        saver = threading.Thread(target=lambda: results.append(ours.save("global", content)))
        saver.start()
        assert at_lock.wait(30)
        _append(store_dir, _dsh_line("global", content, rid="dsh-late"))
        if read_meanwhile:
            assert ours.snapshot("global").records[-1].id == "dsh-late"
    saver.join(30)
    (result,) = results
    assert result.deduped and result.record.id == "dsh-late"  # type: ignore[attr-defined]
    reader = SharedStore(str(store_dir))
    assert [r.content for r in reader.snapshot("global").records].count(content) == 1


WRITER = str(Path(__file__).resolve().parent / "helpers" / "scale_writer.py")
WRITERS = 16
SAVES = 25
#: The project scope the writers' warm-ups read and index, which none of their saves needs.
PROJECT_RECORDS = 4_000


def test_sixteen_freshly_opened_servers_at_a_large_store_all_get_through_the_lock_and_lose_nothing(
    store_dir: Path, tmp_path: Path
):
    """Each writer opens the store as a stdio server does (the warm-up reading and indexing the
    default scopes in the background from the start) and saves at once: the saves neither time
    out at the lock nor read a scope whole again, and the warm-ups give way to them."""
    fill(store_dir, scopes.GLOBAL, BIG)
    project = tmp_path / "work"
    project.mkdir()
    fill(store_dir, scopes.project_key(str(project), "/"), PROJECT_RECORDS)
    SharedStore(str(store_dir)).prepare()
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [PYTHON, WRITER, str(store_dir), str(project), f"writer {k}", str(SAVES), str(go)],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
        for k in range(WRITERS)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        go.touch()
        outputs = [proc.communicate(timeout=300) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert all(proc.returncode == 0 for proc in procs), [err[-2000:] for _out, err in outputs]
    lines = [line for out, _err in outputs for line in out.splitlines()]
    refused = [line for line in lines if line.startswith("refused")]
    acked = [line.split()[1] for line in lines if line.startswith("ack ")]
    assert refused == [], refused
    assert len(acked) == WRITERS * SAVES
    on_disk = [json.loads(line)["id"] for line in Path(store_dir, "global.jsonl").read_text("utf-8").splitlines()]
    assert len(on_disk) == BIG + WRITERS * SAVES
    assert sorted(set(on_disk) & set(acked)) == sorted(acked)  # every acknowledged save, once
    counters = [json.loads(line.split(" ", 1)[1]) for line in lines if line.startswith("counters ")]
    assert len(counters) == WRITERS
    # Each file is read whole about once per process (by the warm-up or the first save) and the
    # other writers' appends then as tails. One extra whole read in a process has been seen under
    # CI load (cause not found; not a loss: every save above is checked) and is allowed; more in
    # one process, or extra reads in more than two processes, fail. A writer the scheduler ran
    # after the others had finished reads their saves in its first read and extends nothing
    # (seen once on a loaded machine): the writers as a whole must have extended.
    assert all(c["parses"] <= 3 for c in counters), counters
    assert sum(c["extends"] for c in counters) >= 1, counters
    assert sum(c["parses"] for c in counters) <= 2 * WRITERS + 2, counters
    assert sum(c["warm_up_pauses"] for c in counters) >= 1, counters  # the warm-ups gave way to the saves
