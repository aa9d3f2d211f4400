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


def test_a_near_duplicate_is_found_among_many_memories_that_share_its_common_words(tmp_path: Path) -> None:
    service = make_service(tmp_path / "store", tmp_path, DSH_MEMORY_VECTOR="off")
    common = "deploy the service with the staging config and check the logs"
    for i in range(400):  # every one shares most words with the target, none is near-identical to it
        service.call("memory_save", {"content": f"{common} before release {i} of team{i % 7}"})
    target = service.call("memory_save", {"content": f"{common} after rotating the vault keys"}).structured["id"]
    near = service.call("memory_save", {"content": f"{common} after rotating the vault keys today"})
    assert [s["id"] for s in near.structured["similar"]] == [target]
    # Closest first, at most three: four rewordings of one line, each a little further from the save.
    base = (
        "zebra quartz marimba lantern orchid falcon meadow copper violet harbor "
        "pebble saffron glacier tundra walnut cobalt juniper lagoon prism thistle"
    )
    extra = ["amber", "birch", "cedar", "dune"]  # Jaccard 20/21, 20/22, 20/23, 20/24: all near
    ids = [
        service.call("memory_save", {"content": " ".join([base, *extra[:n]])}).structured["id"] for n in (1, 2, 3, 4)
    ]
    named = service.call("memory_save", {"content": base}).structured["similar"]
    assert [s["id"] for s in named] == ids[:3]
    assert named[0]["score"] > named[1]["score"] > named[2]["score"]


def test_a_superseded_memory_is_not_named(tmp_path: Path) -> None:
    service = make_service(tmp_path / "store", tmp_path, DSH_MEMORY_VECTOR="off")
    old = service.call("memory_save", {"content": "The nightly build runs at two in the morning UTC"}).structured["id"]
    service.call("memory_save", {"content": "The nightly build now runs at four", "supersedes": old})
    again = service.call("memory_save", {"content": "The nightly build runs at two in the morning UTC!"})
    assert "similar" not in again.structured


def test_a_near_duplicate_saved_since_the_last_search_is_named_however_many_saves_came_between(
    tmp_path: Path,
) -> None:
    service = make_service(tmp_path / "store", tmp_path, DSH_MEMORY_VECTOR="off")
    for i in range(5):
        service.call("memory_save", {"content": f"background fact number {i} about the build farm"})
    service.call("memory_search", {"query": "build farm"})  # the scope is indexed now
    topics = {
        0: "staging database snapshot restore",
        3: "release train calendar freeze",
        100: "vpn certificate rotation",
    }
    for between, topic in topics.items():
        text = f"The {topic} happens every Monday morning, owned by the platform team"
        first = service.call("memory_save", {"content": text}).structured["id"]
        for j in range(between):
            service.call("memory_save", {"content": f"unrelated note {between}-{j} on lunch options nearby"})
        again = service.call("memory_save", {"content": text + " at nine"})
        assert [s["id"] for s in again.structured.get("similar", [])] == [first], (between, again.text)
