"""A store written by the DSH plugin (Node.js): read correctly, and every line we did not change kept byte-for-byte."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from dsh_memory_mcp.store.records import CorruptLine, Record
from dsh_memory_mcp.store.shared import SharedStore

NOW = 1_760_000_500_000

PREF_ID = "3f2a9c1e-7b4d-4e8a-9c2f-1a2b3c4d5e6f"
OLD_ID = "8c1d2e3f-4a5b-4c6d-8e7f-901234567890"
ODD_ID = "b7e6d5c4-b3a2-4918-8776-655443322110"
ESC_ID = "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3"
GONE_ID = "d4c3b2a1-0f9e-4d8c-b7a6-958473625140"

# Exactly what DSH writes (JSON.stringify, raw UTF-8), plus what other writers may leave behind.
PREF = (
    '{"id":"3f2a9c1e-7b4d-4e8a-9c2f-1a2b3c4d5e6f","scope":"global","kind":"preference",'
    '"content":"用户偏好用 pnpm 而不是 npm,提交信息用中文","tags":["前端","包管理"],"source":{"origin":"explicit"},'
    '"createdAt":1760000000000,"updatedAt":1760000000000,"lastAccessedAt":1760000000000,"accessCount":3,'
    '"importance":0.8,"dshExtra":{"x":1}}'
)
OLD = (
    '{"id":"8c1d2e3f-4a5b-4c6d-8e7f-901234567890","scope":"global","kind":"fact","content":"旧的事实:构建用 make",'
    '"tags":[],"source":{"origin":"explicit"},"createdAt":1750000000000,"updatedAt":1750000100000,'
    '"lastAccessedAt":1750000000000,"accessCount":0,"expiredAt":1750000100000}'
)
CORRUPT = '{"id":"broken"'
ODD = (
    '{"content":"键顺序不同的一条记录","id":"b7e6d5c4-b3a2-4918-8776-655443322110","accessCount":1,'
    '"scope":"global","kind":"note","tags":["x"],"lastAccessedAt":1760000000000,"createdAt":1760000000000,'
    '"updatedAt":1760000000000,"source":{"origin":"auto","by":"dsh"}}'
)
ESCAPED = (
    '{"id":"0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3","scope":"global","kind":"rule",'
    '"content":"escaped \\u4e2d\\u6587 and a slash \\/ here","tags":[],"source":{"origin":"explicit"},'
    '"createdAt":1760000000000,"updatedAt":1760000000000,"lastAccessedAt":1760000000000,"accessCount":0,'
    '"importance":0.50}'
)
GONE = (
    '{"id":"d4c3b2a1-0f9e-4d8c-b7a6-958473625140","scope":"global","kind":"decision","content":"将被删除的决定",'
    '"tags":[],"source":{"origin":"explicit"},"createdAt":1760000000000,"updatedAt":1760000000000,'
    '"lastAccessedAt":1760000000000,"accessCount":0}'
)
ORIGINAL = [PREF, OLD, CORRUPT, ODD, ESCAPED, GONE]


@pytest.fixture
def dsh_store(store_dir: Path) -> Path:
    (store_dir / "projects").mkdir(parents=True)
    (store_dir / "global.jsonl").write_bytes("".join(line + "\n" for line in ORIGINAL).encode("utf-8"))
    return store_dir


@pytest.fixture
def store(dsh_store: Path) -> SharedStore:
    s = SharedStore(str(dsh_store), clock=lambda: NOW, touch_delay=60.0)
    yield s
    s.close()


def disk_lines(store_dir: Path) -> list[bytes]:
    return (store_dir / "global.jsonl").read_bytes().split(b"\n")[:-1]


def encoded(*lines: str) -> list[bytes]:
    return [line.encode("utf-8") for line in lines]


def test_a_dsh_store_is_read_with_every_field_and_the_corrupt_line_kept(store: SharedStore):
    snap = store.snapshot("global")
    assert [type(line) for line in snap.lines] == [Record, Record, CorruptLine, Record, Record, Record]
    assert snap.lines[2] == CorruptLine(CORRUPT, 3)
    pref = snap.records[0]
    assert (pref.id, pref.kind, pref.tags, pref.importance) == (PREF_ID, "preference", ["前端", "包管理"], 0.8)
    assert pref.content == "用户偏好用 pnpm 而不是 npm,提交信息用中文"
    assert pref.data["dshExtra"] == {"x": 1} and pref.access_count == 3
    odd = snap.records[2]
    assert (odd.id, odd.content, odd.access_count) == (ODD_ID, "键顺序不同的一条记录", 1)
    assert snap.records[3].content == "escaped 中文 and a slash / here"
    # Expired records stay in the snapshot; callers hide them with is_expired.
    live = [r.id for r in snap.records if not r.is_expired(NOW)]
    assert live == [PREF_ID, ODD_ID, ESC_ID, GONE_ID]


def test_after_a_save_every_untouched_line_is_byte_identical(store: SharedStore, dsh_store: Path):
    result = store.save("global", "新的一条记忆", kind="fact", tags=["新"])
    lines = disk_lines(dsh_store)
    assert lines[:-1] == encoded(*ORIGINAL)
    assert lines[-1] == result.record.raw.encode("utf-8")
    assert CORRUPT.encode() in lines


def test_after_a_delete_every_other_line_is_byte_identical(store: SharedStore, dsh_store: Path):
    removed = store.delete_ids([GONE_ID])
    assert [r.id for r in removed] == [GONE_ID]
    assert disk_lines(dsh_store) == encoded(PREF, OLD, CORRUPT, ODD, ESCAPED)
    removed = store.delete_matching("global", "键顺序")
    assert [r.id for r in removed] == [ODD_ID]
    assert disk_lines(dsh_store) == encoded(PREF, OLD, CORRUPT, ESCAPED)


def test_a_dedupe_against_dsh_content_writes_nothing(store: SharedStore, dsh_store: Path):
    before = (dsh_store / "global.jsonl").read_bytes()
    result = store.save("global", " 用户偏好用 pnpm 而不是 npm,提交信息用中文 ")
    assert result.deduped is True and result.record.id == PREF_ID
    assert (dsh_store / "global.jsonl").read_bytes() == before
    # An expired record is not a duplicate.
    assert store.save("global", "旧的事实:构建用 make").deduped is False


def test_a_touched_dsh_record_keeps_its_key_order_and_unknown_fields(store: SharedStore, dsh_store: Path):
    store.touch({"global": [PREF_ID, ODD_ID]})
    store.flush()
    lines = disk_lines(dsh_store)
    assert [lines[1], lines[2], lines[4], lines[5]] == encoded(OLD, CORRUPT, ESCAPED, GONE)
    pref = json.loads(lines[0])
    assert list(pref) == list(json.loads(PREF))
    assert (pref["accessCount"], pref["lastAccessedAt"], pref["dshExtra"]) == (4, NOW, {"x": 1})
    odd = json.loads(lines[3])
    assert list(odd) == list(json.loads(ODD))
    assert (odd["accessCount"], odd["source"]) == (2, {"origin": "auto", "by": "dsh"})


def test_superseding_a_dsh_record_only_adds_expired_at(store: SharedStore, dsh_store: Path):
    result = store.save("global", "顺序正常的新记录", supersedes=ODD_ID[:8])
    assert result.superseded is not None and result.superseded.id == ODD_ID
    lines = disk_lines(dsh_store)
    assert [lines[i] for i in (0, 1, 2, 4, 5)] == encoded(PREF, OLD, CORRUPT, ESCAPED, GONE)
    odd = json.loads(lines[3])
    expected = dict(json.loads(ODD), updatedAt=NOW, expiredAt=NOW - 1)
    assert list(odd) == list(expected) and odd == expected
    assert lines[6] == result.record.raw.encode()


def test_a_dsh_project_file_is_discovered_and_found_by_prefix(store: SharedStore, dsh_store: Path):
    key = "project:D:\\Work\\应用"
    name = hashlib.sha1(key.encode("utf-8")).hexdigest()
    line = (
        '{"id":"77777777-aaaa-4bbb-8ccc-dddddddddddd","scope":"project:D:\\\\Work\\\\应用","kind":"note",'
        '"content":"Windows 上的项目","tags":[],"source":{"origin":"explicit"},"createdAt":1,"updatedAt":1,'
        '"lastAccessedAt":1,"accessCount":0}'
    )
    (dsh_store / "projects" / f"{name}.jsonl").write_bytes(line.encode("utf-8") + b"\n")
    assert store.discover_scopes() == ["global", key]
    assert store.scope_path(key) == str(dsh_store / "projects" / f"{name}.jsonl")
    [found] = store.find(["77777777"])["77777777"]
    assert found.scope == key and found.content == "Windows 上的项目"
