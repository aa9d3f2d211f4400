"""A look-up by id (get, forget by id) finds an id however another program spelled it, in every
scope that holds it; discovering a store's scopes reads each project file's first records, not
the whole file.

Every test writes the files as another program would, then checks what `find` returns against
the ids it wrote."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dsh_memory_mcp.store import records, scopes
from dsh_memory_mcp.store.shared import SharedStore

PROJECTS = [scopes.project_key(f"/work/p{i}", "/") for i in range(3)]
N = 1200  # records per file: past the head that discovery reads


def write(store_dir: Path, scope: str, lines: list[str]) -> Path:
    path = store_dir / scopes.scope_file_relpath(scope)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(line + "\n" for line in lines).encode("utf-8"))
    return path


def made(scope: str, n: int, tag: str) -> list[records.Record]:
    return [
        records.new_record(scope=scope, content=f"{tag} {i} 部署流水线 nightly backup", now=1_700_000_000_000 + i)
        for i in range(n)
    ]


@pytest.fixture
def big(store_dir: Path) -> dict[str, list[records.Record]]:
    out = {scope: made(scope, N, scope[-6:]) for scope in [scopes.GLOBAL, *PROJECTS]}
    for scope, recs in out.items():
        write(store_dir, scope, [r.raw for r in recs])
    return out


def test_discovery_reads_only_the_first_records_of_each_project_file(store_dir: Path, big):
    s = SharedStore(str(store_dir))
    assert s.discover_scopes() == [scopes.GLOBAL, *sorted(PROJECTS)]
    assert s.counters()["parses"] == 0


def test_a_file_whose_first_records_name_no_scope_of_its_own_is_still_discovered(store_dir: Path):
    scope = PROJECTS[0]
    # 100 KB of lines naming another scope (a copy DSH made by hand), then one of its own.
    foreign = [r.raw for r in made(scopes.GLOBAL, 400, "foreign")]
    write(store_dir, scope, [*foreign, made(scope, 1, "own")[0].raw])
    s = SharedStore(str(store_dir))
    assert s.discover_scopes() == [scope]
    assert s.counters()["parses"] == 1  # the head named nothing: the whole file was read


def test_an_id_and_a_prefix_in_any_case_are_found_in_the_one_file_that_holds_them(store_dir: Path, big):
    s = SharedStore(str(store_dir))
    target = big[PROJECTS[1]][700]
    prefix = target.id[:10].upper()  # prefixes match in any case
    got = s.find([target.id, prefix, "00000000-nothing"])
    assert [r.raw for r in got[target.id]] == [target.raw]
    assert [r.raw for r in got[prefix]] == [target.raw]
    assert got["00000000-nothing"] == []
    assert [r.raw for r in s.find([target.id])[target.id]] == [target.raw]  # the same again


def test_the_same_id_in_two_scopes_is_found_in_both(store_dir: Path, big):
    twin = big[PROJECTS[2]][5]
    path = store_dir / scopes.scope_file_relpath(scopes.GLOBAL)
    with path.open("ab") as f:  # the record copied into global by another program
        f.write((twin.raw.replace(f'"scope":"{PROJECTS[2]}"', '"scope":"global"') + "\n").encode("utf-8"))
    got = SharedStore(str(store_dir)).find([twin.id])[twin.id]
    assert [r.scope for r in got] == [scopes.GLOBAL, PROJECTS[2]]


def _foreign_line(scope: str, ident: str, *, spelled: str | None = None) -> str:
    """A record as another program may write it; `spelled` is the id's JSON spelling in the line."""
    data = records.new_record(scope=scope, content="另一个程序写的记录 foreign", now=1_700_000_000_000).data
    line = json.dumps({**data, "id": "@@ID@@"}, ensure_ascii=False, separators=(",", ":"))
    return line.replace('"@@ID@@"', spelled if spelled is not None else json.dumps(ident, ensure_ascii=False))


@pytest.mark.parametrize(
    ("ident", "spelled", "key"),
    [
        # \u escapes: the id's letters are not in the file as bytes at all.
        ("abcdef12-3456", '"\\u0061\\u0062cdef12-3456"', "abcdef12"),
        # \/: a slash with a second spelling.
        ("ab/cdefgh-99", '"ab\\/cdefgh-99"', "ab/cdefg"),
        # The Kelvin sign lower-cases to an ASCII k, which its bytes do not show.
        ("\u212aelvin-0001", None, "kelvin-0"),
        # Dotted capital I lower-cases to i + a combining dot: an ASCII prefix ending in i matches.
        ("abcdefg\u0130-capital", None, "abcdefgi"),
        # A quote is written escaped: the asked bytes are not in the file as such.
        ('ab"cdefgh-1', None, 'ab"cdefg'),
        # Upper case in the file, lower case asked.
        ("ABCDEF99-UPPER", None, "abcdef99-up"),
    ],
)
def test_an_id_spelled_otherwise_by_another_program_is_found(
    store_dir: Path, big, ident: str, spelled: str | None, key: str
):
    path = store_dir / scopes.scope_file_relpath(PROJECTS[0])
    with path.open("ab") as f:
        f.write((_foreign_line(PROJECTS[0], ident, spelled=spelled) + "\n").encode("utf-8"))
    got = SharedStore(str(store_dir)).find([key])[key]
    assert [r.id for r in got] == [ident]


def test_a_record_appended_after_a_look_up_that_found_nothing_is_found_by_the_next(store_dir: Path, big):
    s = SharedStore(str(store_dir))
    assert s.find(["feedface-0001"])["feedface-0001"] == []
    path = store_dir / scopes.scope_file_relpath(PROJECTS[1])
    with path.open("ab") as f:
        f.write((_foreign_line(PROJECTS[1], "FEEDFACE-0001-late") + "\n").encode("utf-8"))
    assert [r.id for r in s.find(["feedface-0001"])["feedface-0001"]] == ["FEEDFACE-0001-late"]
    # Another file replaced by one whose new record's id is spelled with an escape.
    other = store_dir / scopes.scope_file_relpath(PROJECTS[2])
    tmp = other.with_name("tmp.jsonl")
    escaped = _foreign_line(PROJECTS[2], "x", spelled='"\\u0078-beef-0002"')
    tmp.write_bytes(other.read_bytes() + (escaped + "\n").encode("utf-8"))
    os.replace(tmp, other)
    assert [r.id for r in s.find(["x-beef-0002"])["x-beef-0002"]] == ["x-beef-0002"]


def test_a_fifo_or_a_symlink_to_a_device_among_scope_files_does_not_hang_a_look_up(store_dir: Path, big):
    projects = store_dir / "projects"
    fifo = projects / (scopes.scope_sha1("/work/fifo") + ".jsonl")
    os.mkfifo(fifo)
    (projects / (scopes.scope_sha1("/work/zero") + ".jsonl")).symlink_to("/dev/zero")
    target = big[scopes.GLOBAL][3]
    assert [r.raw for r in SharedStore(str(store_dir)).find([target.id])[target.id]] == [target.raw]
