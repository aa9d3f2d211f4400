"""A save names live memories that nearly repeat it: lexical near-identity when vectors are off."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.services import make_service


def test_without_vectors_a_near_identical_save_is_named_and_a_different_one_is_not(tmp_path: Path) -> None:
    service = make_service(tmp_path / "store", tmp_path, DSH_MEMORY_VECTOR="off")
    first = service.call("memory_save", {"content": "Always use pnpm to install the dependencies of this repo"})
    near = service.call("memory_save", {"content": "Always use pnpm to install the dependencies of this repo!!"})
    assert near.structured["deduped"] is False  # not byte-identical: saved
    assert [s["id"] for s in near.structured["similar"]] == [first.structured["id"]]
    assert 0.8 <= near.structured["similar"][0]["score"] <= 1.0
    assert "supersedes" in near.text
    other = service.call("memory_save", {"content": "Always use yarn to build the docs site"})
    assert "similar" not in other.structured and "supersedes" not in other.text
    same = service.call("memory_save", {"content": "Always use pnpm to install the dependencies of this repo"})
    assert same.structured["deduped"] is True and "similar" not in same.structured
