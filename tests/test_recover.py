"""Records erased by an unlocked writer: noticed (stderr once, stats, doctor), and `recover`
puts back exactly what we acknowledged — never what our tools forgot or superseded."""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path

import pytest

from dsh_memory_mcp.store.records import Record, now_ms, parse_lines
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, SRC, subprocess_env

DSH_LINE = (
    '{"id":"0f0f0f0f-aaaa-4bbb-8ccc-123456789abc","scope":"global","kind":"note","content":"written by DSH",'
    '"tags":[],"source":{"origin":"dsh"},"createdAt":1,"updatedAt":2,"lastAccessedAt":3,"accessCount":0}'
)


def unlocked_rewrite(store: SharedStore, keep: list[str]) -> None:
    """What the DSH plugin does: rewrite the whole file from an old snapshot (here: `keep`), no lock."""
    path = Path(store.scope_path("global"))
    tmp = Path(str(path) + ".tmp")
    tmp.write_text("".join(line + "\n" for line in [*keep, DSH_LINE]), encoding="utf-8")
    tmp.replace(path)


def ids(store: SharedStore) -> list[str]:
    text = Path(store.scope_path("global")).read_text(encoding="utf-8")
    return [line.id for line in parse_lines(text) if isinstance(line, Record)]


@pytest.fixture
def erased(store: SharedStore) -> dict[str, Record]:
    """Five of our records; then one forgotten, one superseded, and an unlocked writer's rewrite
    that keeps only the first (its snapshot predates the rest)."""
    made = {name: store.save("global", f"memory {name}").record for name in ("first", "a", "b", "gone", "old")}
    store.delete_ids([made["gone"].id])
    made["new"] = store.save("global", "memory new", supersedes=made["old"].id).record
    unlocked_rewrite(store, [made["first"].raw, made["old"].raw])  # the snapshot still has "old" live
    return made


def test_missing_acknowledged_records_are_found_but_not_what_was_forgotten_or_superseded(
    store: SharedStore, erased: dict[str, Record]
):
    missing = SharedStore(store.root).missing()
    assert sorted(e.id for e in missing["global"]) == sorted(erased[n].id for n in ("a", "b", "new"))


def test_a_server_reading_the_scope_says_so_once_with_the_count_and_the_fix(
    store: SharedStore, erased: dict[str, Record], caplog: pytest.LogCaptureFixture
):
    other = SharedStore(store.root)
    caplog.set_level(logging.WARNING)
    other.snapshot("global")
    other.snapshot("global")
    Path(store.scope_path("global")).touch()  # a new identity, the same loss: no second report
    other.snapshot("global")
    said = [r.getMessage() for r in caplog.records if "recover" in r.getMessage()]
    assert len(said) == 1 and "少了 3 条" in said[0] and "dsh-memory-mcp recover" in said[0]


def test_recover_puts_back_the_exact_lines_and_a_dry_run_writes_nothing(store: SharedStore, erased: dict[str, Record]):
    path = Path(store.scope_path("global"))
    before = path.read_bytes()
    assert {k: len(v) for k, v in SharedStore(store.root).recover(dry_run=True).items()} == {"global": 3}
    assert path.read_bytes() == before
    done = SharedStore(store.root).recover()
    assert sorted(e.id for e in done["global"]) == sorted(erased[n].id for n in ("a", "b", "new"))
    after = path.read_bytes()
    assert after.startswith(before)  # everything that was there stays, byte for byte
    added = after[len(before) :].decode("utf-8").splitlines()
    assert sorted(added) == sorted(erased[n].raw for n in ("a", "b", "new"))
    assert erased["gone"].id not in ids(store)
    assert SharedStore(store.root).missing() == {} and SharedStore(store.root).recover() == {}


def run_cli(store_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args, "--store-dir", str(store_dir)],
        capture_output=True,
        text=True, encoding="utf-8",
        env=subprocess_env(),
        timeout=60,
        input="",
    )


def test_stats_doctor_and_the_recover_command_report_and_restore_the_erased_records(
    store: SharedStore, store_dir: Path, erased: dict[str, Record]
):
    stats = run_cli(store_dir, "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["missingAcknowledged"] == {"global": 3}
    text = run_cli(store_dir, "stats")
    assert "少了 3 条" in text.stdout and "recover" in text.stdout
    doctor = run_cli(store_dir, "doctor")
    assert "被覆盖的记忆" in doctor.stdout and "3 条" in doctor.stdout and "recover" in doctor.stdout
    dry = run_cli(store_dir, "recover", "--dry-run")
    assert dry.returncode == 0 and "将恢复 3 条" in dry.stdout
    assert sorted(ids(store)) == sorted([erased["first"].id, erased["old"].id, "0f0f0f0f-aaaa-4bbb-8ccc-123456789abc"])
    real = run_cli(store_dir, "recover", "--json")
    assert real.returncode == 0, real.stderr
    assert sorted(json.loads(real.stdout)["restored"]["global"]) == sorted(erased[n].id for n in ("a", "b", "new"))
    assert json.loads(run_cli(store_dir, "stats", "--json").stdout)["missingAcknowledged"] == {}


@pytest.mark.slow
def test_the_coexist_scenario_loses_acknowledged_saves_and_recover_brings_every_one_back():
    script = Path(SRC).parent / "scripts" / "acceptance_coexist.py"
    proc = subprocess.run(
        [PYTHON, str(script), "--writers", "4", "--per-writer", "6", "--unlocked", "10", "--rounds", "1"],
        capture_output=True,
        text=True, encoding="utf-8",
        env=subprocess_env(),
        timeout=300,
    )
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "✗" not in proc.stdout
    assert "recover 之后加锁写者 24/24 条(仍缺 0)" in proc.stdout


# -- torn journal lines ------------------------------------------------------------------------

# Saves records in a subprocess whose file-size limit stops the journal a few bytes past its
# current end (a real short write: the kernel cuts the write, the next one gets EFBIG).
_LIMITED_SAVE = """
import os, resource, sys
from dsh_memory_mcp.store.shared import SharedStore
root, content, room = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = SharedStore(root)
journal = os.path.join(root, ".journal")
segment = max(os.path.join(journal, n) for n in os.listdir(journal))
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(segment) + room, resource.RLIM_INFINITY))
try:
    store.save("global", content)
except Exception as exc:
    print(type(exc).__name__, getattr(exc, "code", ""))
    sys.exit(3)
"""


def segment_bytes(store_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((store_dir / ".journal").glob("*.ndjson")))


@pytest.fixture
def torn(store: SharedStore, store_dir: Path) -> dict[str, Record]:
    """Records A and B saved; other scopes make the journal much larger than the global file;
    then a save whose journal line a file-size limit cut after 40 bytes (no final newline)."""
    made = {name: store.save("global", f"torn-tail memory {name}").record for name in ("a", "b")}
    for i in range(20):
        store.save(f"project:/elsewhere/{i}", f"padding memory {i} " + "x" * 200)
    proc = subprocess.run(
        [PYTHON, "-c", _LIMITED_SAVE, str(store_dir), "torn-tail memory c", "40"],
        capture_output=True,
        text=True, encoding="utf-8",
        env=subprocess_env(),
        timeout=60,
    )
    assert proc.returncode == 3 and "STORE_ERROR" in proc.stdout, proc.stdout + proc.stderr
    assert not segment_bytes(store_dir).endswith(b"\n")  # the tail really is torn
    return made


def test_a_forget_after_a_torn_journal_tail_is_journalled_and_recover_does_not_bring_it_back(
    store_dir: Path, torn: dict[str, Record]
):
    forgot = run_cli(store_dir, "forget", torn["a"].id, "--json")
    assert forgot.returncode == 0, forgot.stderr
    assert json.loads(forgot.stdout)["ids"] == [torn["a"].id]
    stats = run_cli(store_dir, "stats", "--json")
    assert json.loads(stats.stdout)["missingAcknowledged"] == {}, stats.stdout
    assert "少了" not in stats.stderr
    dry = run_cli(store_dir, "recover", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["restored"] == {}
    assert torn["a"].id not in (store_dir / "global.jsonl").read_text(encoding="utf-8")
    assert b"torn-tail memory a" not in segment_bytes(store_dir)  # its text left the journal too


def test_a_save_after_a_torn_journal_tail_is_still_protected(store: SharedStore, torn: dict[str, Record]):
    later = store.save("global", "torn-tail memory d").record
    unlocked_rewrite(store, [torn["a"].raw, torn["b"].raw])  # an old snapshot without d
    done = SharedStore(store.root).recover()
    assert [e.id for e in done["global"]] == [later.id]
    assert later.id in ids(store)


def run_limited(store_dir: Path, room: int, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI with a file-size limit `room` bytes past the journal's current end."""
    segment = max((store_dir / ".journal").glob("*.ndjson"))
    limit = segment.stat().st_size + room

    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args, "--store-dir", str(store_dir)],
        capture_output=True,
        text=True, encoding="utf-8",
        env=subprocess_env(),
        timeout=60,
        input="",
        preexec_fn=cap,
    )


@pytest.mark.parametrize("room", [0, 30])
def test_a_forget_whose_journal_entry_cannot_be_written_whole_is_refused_and_removes_nothing(
    store: SharedStore, store_dir: Path, room: int
):
    keep = store.save("global", "forget me not").record
    for i in range(20):
        store.save(f"project:/elsewhere/{i}", f"padding memory {i} " + "x" * 200)
    scope_file = store_dir / "global.jsonl"
    before = scope_file.read_bytes()
    proc = run_limited(store_dir, room, "forget", keep.id, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["code"] == "STORE_ERROR"
    assert scope_file.read_bytes() == before  # nothing removed
    # And what the torn entry left behind never counts as a removal: the record stays protected.
    unlocked_rewrite(store, [])
    assert [e.id for e in SharedStore(store.root).recover()["global"]] == [keep.id]


def test_a_journal_line_that_does_not_parse_makes_recover_refuse_the_ids_it_names_and_say_why(
    store: SharedStore, store_dir: Path
):
    a = store.save("global", "glued memory a").record
    b = store.save("global", "glued memory b").record
    # What 11f31c0 wrote after a torn tail: the next forget glued onto the torn line.
    segment = max((store_dir / ".journal").glob("*.ndjson"))
    with segment.open("ab") as f:
        f.write(b'{"t":1,"op":"save","scope":"global","id":"0000-torn","line":"{\\"id')
        f.write(json.dumps({"t": 2, "op": "forget", "scope": "global", "ids": [a.id]}).encode() + b"\n")
    unlocked_rewrite(store, [])  # a and b are both gone from the file now
    assert [e.id for e in SharedStore(store.root).missing()["global"]] == [b.id]
    real = run_cli(store_dir, "recover", "--json")
    assert real.returncode == 0, real.stderr
    answer = json.loads(real.stdout)
    assert answer["restored"] == {"global": [b.id]}
    (refusal,) = answer["refused"]["global"]
    lineno = len(segment.read_bytes().rstrip(b"\n").split(b"\n"))
    assert refusal["id"] == a.id and f"{segment.name} 第 {lineno} 行无法解析" in refusal["reason"]
    text = run_cli(store_dir, "recover")
    assert "另有 1 条" in text.stdout and a.id[:8] in text.stdout and "无法排除" in text.stdout
    assert a.id not in ids(store)
    # doctor names the one it cannot decide about, instead of only "every acknowledged record is there"
    doctor = run_cli(store_dir, "doctor")
    (line,) = [ln for ln in doctor.stdout.splitlines() if "无法确定的记忆" in ln]
    assert "另有 1 条记忆不在文件里" in line, doctor.stdout
    assert "recover --dry-run" in doctor.stdout


def test_a_supersede_whose_journal_entry_cannot_be_written_is_refused_and_the_old_record_stays_live(
    store: SharedStore, store_dir: Path
):
    from tests.test_journal import INIT, exchange

    old = store.save("global", "旧的部署说明").record
    for i in range(20):
        store.save(f"project:/elsewhere/{i}", f"padding memory {i} " + "x" * 200)
    scope_file = store_dir / "global.jsonl"
    before = scope_file.read_bytes()
    limit = max((store_dir / ".journal").glob("*.ndjson")).stat().st_size

    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    with subprocess.Popen(
        [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(store_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=subprocess_env(),
        preexec_fn=cap,
    ) as proc:
        try:
            call = {"name": "memory_save", "arguments": {"content": "新的部署说明", "supersedes": old.id, "scope": "global"}}
            answers = exchange(
                proc,
                [
                    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
                ],
                expect=2,
            )
            proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    result = answers[1]["result"]
    assert result["isError"] is True and result["structuredContent"]["code"] == "STORE_ERROR", result
    assert scope_file.read_bytes() == before  # nothing expired, nothing added
    assert [e.id for e in SharedStore(store.root).missing().get("global", [])] == []
    unlocked_rewrite(store, [])  # still protected: its save is live in the journal
    assert old.id in [e.id for e in SharedStore(store.root).recover()["global"]]


# -- forget and supersede of a record an unlocked writer already erased --------------------------


def drop_lines(store: SharedStore, scope: str, *gone: str) -> None:
    """An unlocked writer rewriting `scope`'s file (tmp + rename, no lock) without the records `gone`."""
    path = Path(store.scope_path(scope))
    kept = [line for line in path.read_text(encoding="utf-8").splitlines(keepends=True) if not any(g in line for g in gone)]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(kept), encoding="utf-8")
    tmp.replace(path)


def journal_text(store_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (store_dir / ".journal").glob("*.ndjson"))


@pytest.fixture
def tools(store_dir: Path, tmp_path: Path):
    from tests.helpers.services import make_service

    service = make_service(store_dir, tmp_path)
    yield service
    service.store.close()


def saved_id(tools, content: str, **args: str) -> str:
    answer = tools.call("memory_save", {"content": content, "scope": "global", **args})
    assert not answer.is_error, answer.text
    return str(answer.structured["id"])


def test_forgetting_a_record_an_unlocked_writer_erased_keeps_recover_from_bringing_it_back(tools, store_dir: Path):
    x = saved_id(tools, "被抹掉又被遗忘的记忆:紫色长颈鹿")
    y = saved_id(tools, "留下的记忆")
    drop_lines(tools.store, "global", x)
    answer = tools.call("memory_forget", {"id": x[:8]})
    assert not answer.is_error, answer.text
    assert answer.structured == {"ok": True, "deleted": 1, "ids": [x]}
    assert "已不在记忆文件中" in answer.text and "recover 不会再恢复" in answer.text
    assert SharedStore(str(store_dir)).missing() == {}
    assert SharedStore(str(store_dir)).recover() == {}
    assert x not in (store_dir / "global.jsonl").read_text(encoding="utf-8")
    assert "紫色长颈鹿".encode() not in journal_text(store_dir)  # its text left the journal too
    assert y in (store_dir / "global.jsonl").read_text(encoding="utf-8")


def test_forgetting_by_query_also_takes_the_erased_records_it_matches(tools, store_dir: Path):
    x = saved_id(tools, "按内容遗忘:橙色海豹")
    drop_lines(tools.store, "global", x)
    answer = tools.call("memory_forget", {"query": "橙色海豹", "scope": "global"})
    assert answer.structured == {"ok": True, "deleted": 1, "ids": [x]}
    assert SharedStore(str(store_dir)).recover() == {}
    assert "橙色海豹".encode() not in journal_text(store_dir)


def test_superseding_an_erased_record_keeps_recover_from_restoring_it_beside_its_correction(tools, store_dir: Path):
    old = saved_id(tools, "部署在周五")
    drop_lines(tools.store, "global", old)
    answer = tools.call("memory_save", {"content": "部署在周一", "scope": "global", "supersedes": old})
    assert not answer.is_error, answer.text
    assert answer.structured["superseded"] == old and "已取代旧记忆" in answer.text
    assert SharedStore(str(store_dir)).recover() == {}
    assert old not in ids(SharedStore(str(store_dir))) and "部署在周一" in (store_dir / "global.jsonl").read_text(encoding="utf-8")
    assert "部署在周五".encode() not in journal_text(store_dir)


@pytest.mark.parametrize("then", ["kept", "erased", "forgotten", "superseded"])
def test_a_text_saved_again_after_its_first_copy_was_erased_is_never_restored_twice(
    tools, store_dir: Path, then: str
):
    first = saved_id(tools, "同一句话:周三开例会")
    drop_lines(tools.store, "global", first)
    second = saved_id(tools, "同一句话:周三开例会")
    assert second != first  # the first copy was gone: a new record
    if then == "erased":
        drop_lines(tools.store, "global", second)
    elif then == "forgotten":
        answer = tools.call("memory_forget", {"id": second})  # the erased first copy of its text goes too
        assert sorted(answer.structured["ids"]) == sorted([first, second]) and first[:8] in answer.text
    elif then == "superseded":
        saved_id(tools, "改了:周四开例会", supersedes=second)
    store = SharedStore(str(store_dir))
    restored = store.recover()
    expected = {"global": [second]} if then == "erased" else {}
    assert {scope: [e.id for e in entries] for scope, entries in restored.items()} == expected
    now = now_ms()
    live = [r for r in store.snapshot("global").records if r.content == "同一句话:周三开例会" and not r.is_expired(now)]
    assert len(live) == (0 if then in ("forgotten", "superseded") else 1)
    assert store.missing() == {}


def test_a_forgotten_rule_leaves_no_text_in_the_digest_cache(tools, store_dir: Path, tmp_path: Path):
    from dsh_memory_mcp.service import digest

    cache = digest.DigestCache(digest.default_cache_dir(), str(store_dir))
    rule = saved_id(tools, "规则:提交前必须跑黄色企鹅检查", kind="rule")
    saved_id(tools, "规则:代码评审至少一人", kind="rule")
    assert "黄色企鹅" in cache.get(tools.store, None, now_ms())
    folder = Path(str(digest.default_cache_dir()))
    assert any("黄色企鹅" in p.read_text(encoding="utf-8") for p in folder.iterdir())  # cached on disk
    assert tools.call("memory_forget", {"id": rule}).structured["deleted"] == 1
    assert not any("黄色企鹅" in p.read_text(encoding="utf-8") for p in folder.iterdir())
    assert "黄色企鹅" not in cache.get(tools.store, None, now_ms())


def test_a_forget_leaves_the_forgotten_words_in_no_file_under_the_store(store_dir: Path, tmp_path: Path):
    from dsh_memory_mcp.config import resolve_settings
    from dsh_memory_mcp.service.compose import open_service
    from dsh_memory_mcp.store import records, scopes

    path = store_dir / scopes.scope_file_relpath(scopes.GLOBAL)
    path.parent.mkdir(parents=True)
    made = [records.new_record(scope="global", content=f"filler memory {i}", now=1000 + i) for i in range(2500)]
    path.write_bytes(records.render_bytes(made))
    settings = resolve_settings(store_dir=str(store_dir), project_dir=str(tmp_path), env={}, cwd=str(tmp_path))
    service = open_service(settings)
    try:
        saved = service.call("memory_save", {"content": "the quetzalcoatlus password hint", "scope": "global"})
        assert service.call("memory_search", {"query": "quetzalcoatlus", "scope": "global"}).structured["count"] == 1
        assert service.call("memory_forget", {"id": saved.structured["id"]}).structured["deleted"] == 1
        service.store.flush()
        holders = [p for p in store_dir.rglob("*") if p.is_file() and b"quetzalcoatlus" in p.read_bytes()]
        assert holders == []
    finally:
        service.store.close()
