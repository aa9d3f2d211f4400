"""The human CLI for a person cleaning up: a safe forget by query, edit / save --supersedes / move
that keep a memory's history (created time, use count, source), ``get --history``, and projects
named by their folder. Real subprocesses on a real store directory."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dsh_memory_mcp.store.records import new_record
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, subprocess_env

TIMEOUT = 60
DAY = 86_400_000


@pytest.fixture
def project(tmp_path: Path) -> Path:
    work = tmp_path / "work" / "atlas-web"
    work.mkdir(parents=True)
    return work


def run(project: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=subprocess_env(DSH_MEMORY_PROJECT=str(project)),
        cwd=str(project),
        timeout=TIMEOUT,
    )


def live(store: SharedStore, scope: str) -> dict[str, dict]:
    fresh = SharedStore(store.root)
    try:
        return {r.id: r.data for r in fresh.snapshot(scope).records if r.expired_at is None}
    finally:
        fresh.close()


def on_disk(store: SharedStore, scope: str) -> dict[str, dict]:
    fresh = SharedStore(store.root)
    try:
        return {r.id: r.data for r in fresh.snapshot(scope).records}
    finally:
        fresh.close()


def test_forget_by_query_lists_first_a_dry_run_deletes_nothing_and_two_matches_need_yes(
    store: SharedStore, project: Path
) -> None:
    key = f"project:{project}"
    a = store.save(key, "the deploy key lives in vault").record.id
    b = store.save(key, "the deploy key lives in Vault (prod)").record.id
    other = store.save(key, "lint with ruff").record.id
    dry = run(project, "forget", "--query", "deploy key", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert a[:8] in dry.stdout and b[:8] in dry.stdout and other[:8] not in dry.stdout
    assert set(live(store, key)) == {a, b, other}
    # Two near-duplicates: without --yes (and no terminal) nothing goes, the list says what would.
    refused = run(project, "forget", "--query", "deploy key")
    assert refused.returncode == 1
    assert a[:8] in refused.stdout and b[:8] in refused.stdout and "--yes" in refused.stderr
    assert set(live(store, key)) == {a, b, other}
    # One match is one memory: forgotten at once, like forget ID.
    one = run(project, "forget", "--query", "(prod)")
    assert one.returncode == 0 and b[:8] in one.stdout
    assert set(live(store, key)) == {a, other}
    store.save(key, "the deploy key rotates monthly")
    yes = run(project, "forget", "--query", "deploy key", "--yes")
    assert yes.returncode == 0, yes.stderr
    assert set(live(store, key)) == {other}
    assert run(project, "forget", other, "--dry-run").returncode == 2  # a dry run is for --query


def test_edit_keeps_created_uses_and_source_get_history_shows_the_versions_and_save_supersedes(
    store: SharedStore, project: Path
) -> None:
    created = 1_700_000_000_000
    first = new_record(
        scope="global",
        content="build with make",
        kind="fact",
        tags=["build"],
        source={"origin": "explicit", "client": "codex/0.9"},
        now=created,
    ).with_changes(accessCount=8)
    store.insert("global", [first])
    edited = run(project, "edit", first.id[:8], "--tags", "build,tools")
    assert edited.returncode == 0, edited.stderr
    second = edited.stdout.strip()
    records = on_disk(store, "global")
    assert records[first.id]["expiredAt"] is not None
    new = records[second]
    assert (new["content"], new["kind"], new["tags"]) == ("build with make", "fact", ["build", "tools"])
    assert (new["createdAt"], new["accessCount"], new["source"]) == (created, 8, first.data["source"])
    assert new["supersedes"] == first.id and new["editedBy"]["client"] == "cli"
    history = run(project, "get", second[:8], "--history")
    assert history.returncode == 0, history.stderr
    versions = history.stdout.split("的版本")[1]
    assert versions.index(second[:8]) < versions.index(first.id[:8])  # newest first
    assert "使用 8 次" in versions and "codex/0.9" in versions
    # save --supersedes: the same mechanism from the save command.
    third = run(project, "save", "build with just", "--supersedes", second[:8])
    assert third.returncode == 0, third.stderr
    last = on_disk(store, "global")[third.stdout.strip()]
    assert (last["createdAt"], last["accessCount"], last["supersedes"]) == (created, 8, second)
    assert run(project, "edit", first.id).returncode == 2  # nothing to change
    gone = run(project, "edit", first.id, "new words")
    assert gone.returncode == 1 and "GONE" in gone.stderr  # replaced already: edit the newest


def test_move_to_global_and_to_a_project_by_folder_name_keeps_the_history(
    store: SharedStore, project: Path, tmp_path: Path
) -> None:
    key = f"project:{project}"
    rec = store.save(key, "api runs on port 8080", source={"origin": "explicit", "client": "cursor/2"}).record
    moved = run(project, "move", rec.id[:8], "--to", "global")
    assert moved.returncode == 0, moved.stderr
    in_global = on_disk(store, "global")[moved.stdout.strip()]
    assert (in_global["createdAt"], in_global["source"]["client"]) == (rec.created_at, "cursor/2")
    assert on_disk(store, key)[rec.id]["expiredAt"] is not None
    # Back into the project, named by its folder.
    back = run(project, "move", moved.stdout.strip()[:8], "--to", "atlas-web")
    assert back.returncode == 0, back.stderr
    assert live(store, key)[back.stdout.strip()]["content"] == "api runs on port 8080"


def test_projects_are_named_by_their_folder_an_unknown_or_shared_name_is_an_error_naming_the_candidates(
    store: SharedStore, project: Path, tmp_path: Path
) -> None:
    store.save(f"project:{project}", "atlas uses pnpm")
    twin_a = tmp_path / "a" / "shop"
    twin_b = tmp_path / "b" / "shop"
    store.save(f"project:{twin_a}", "shop a")
    store.save(f"project:{twin_b}", "shop b")
    listed = run(project, "list", "--scope", "atlas-web", "--json")
    assert listed.returncode == 0, listed.stderr
    body = json.loads(listed.stdout)
    assert body["scopes"] == [f"project:{project}"] and body["records"][0]["content"] == "atlas uses pnpm"
    unknown = run(project, "list", "--scope", "atlas")
    assert unknown.returncode == 2 and "atlas-web" in unknown.stderr and "global" not in unknown.stdout
    shared = run(project, "search", "shop", "--scope", "shop")
    assert shared.returncode == 2 and str(twin_a) in shared.stderr and str(twin_b) in shared.stderr
    assert run(project, "list", "--scope", "global").returncode == 0


def _at_terminal(project: Path, answer: str, *args: str) -> tuple[int, str]:
    """Run the CLI with stdin and stdout on a pseudo-terminal, answer its question, return (code, output)."""
    import os
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [PYTHON, "-m", "dsh_memory_mcp", *args],
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE,
        env=subprocess_env(DSH_MEMORY_PROJECT=str(project)),
        cwd=str(project),
    )
    os.close(slave)
    seen = b""
    try:
        while b"[y/N]" not in seen:
            ready, _, _ = select.select([master], [], [], TIMEOUT)
            assert ready, seen
            seen += os.read(master, 4096)
        os.write(master, answer.encode() + b"\n")
        code = proc.wait(timeout=TIMEOUT)
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        assert proc.stderr is not None
        proc.stderr.close()
    return code, seen.decode("utf-8", "replace")


def test_at_a_terminal_forget_by_query_asks_and_only_y_deletes(store: SharedStore, project: Path) -> None:
    key = f"project:{project}"
    ids = {store.save(key, f"staging url {n}").record.id for n in range(2)}
    code, shown = _at_terminal(project, "n", "forget", "--query", "staging url")
    assert code == 1 and all(i[:8] in shown for i in ids)
    assert set(live(store, key)) == ids
    code, _ = _at_terminal(project, "y", "forget", "--query", "staging url")
    assert code == 0 and live(store, key) == {}
