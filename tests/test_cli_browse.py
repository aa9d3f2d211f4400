"""``list`` for a person going through a store: paging past 200 (``--offset``, the header names
the next page), ``--since`` (a local date or ``7d``), ``--client`` (who wrote it, as the page's
client menu), and projects shown by their folder's name (the whole path under ``--long``).
Real subprocesses on a real store directory."""

from __future__ import annotations

import json
import subprocess
import time
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


def run(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=subprocess_env(DSH_MEMORY_PROJECT=str(project), **env),
        cwd=str(project),
        timeout=TIMEOUT,
    )


def ids_in(text: str) -> list[str]:
    return [line.split("id=")[1].split()[0] for line in text.splitlines() if line.startswith("  id=")]


def test_list_pages_past_200_and_the_header_names_the_next_offset(store: SharedStore, project: Path) -> None:
    now = int(time.time() * 1000)
    key = f"project:{project}"
    made = [new_record(scope=key, content=f"memory number {n}", now=now - n * 60_000) for n in range(205)]
    store.insert(key, made)
    first = run(project, "list", "--scope", "project", "--limit", "200")
    assert first.returncode == 0, first.stderr
    head = first.stdout.splitlines()[0]
    assert head == "共 205 条记忆(范围:atlas-web [来自 DSH_MEMORY_PROJECT];按最近更新排序;还有 5 条:--offset 200)"
    assert ids_in(first.stdout) == [r.short_id for r in made[:200]]
    rest = run(project, "list", "--scope", "project", "--limit", "200", "--offset", "200")
    assert rest.returncode == 0, rest.stderr
    assert (
        rest.stdout.splitlines()[0]
        == "共 205 条记忆(范围:atlas-web [来自 DSH_MEMORY_PROJECT];按最近更新排序,从第 201 条起)"
    )
    assert ids_in(rest.stdout) == [r.short_id for r in made[200:]]
    middle = run(project, "list", "--scope", "project", "--limit", "2", "--offset", "3", "--json")
    listed = json.loads(middle.stdout)
    assert [r["id"] for r in listed["records"]] == [made[3].id, made[4].id] and listed["total"] == 205
    english = run(project, "list", "--scope", "project", "--limit", "200", LANG="en_US.UTF-8", LC_ALL="en_US.UTF-8")
    assert "newest first; 5 more: --offset 200)" in english.stdout.splitlines()[0]
    bad = run(project, "list", "--offset=-1")
    assert bad.returncode == 1 and "OFFSET_RANGE" in bad.stderr


def test_since_takes_a_local_date_or_days_and_client_names_who_wrote_it(store: SharedStore, project: Path) -> None:
    now = int(time.time() * 1000)
    old = new_record(scope="global", content="old one", now=now - 30 * DAY, source={"client": "codex/0.9"})
    recent = new_record(scope="global", content="recent one", now=now - 2 * DAY, source={"client": "Claude-Code/2"})
    by_hand = new_record(scope="global", content="by hand", now=now - 3 * DAY)
    store.insert("global", [old, recent, by_hand])

    def listed(*args: str) -> set[str]:
        done = run(project, "list", "--scope", "global", *args)
        assert done.returncode == 0, done.stderr
        return set(ids_in(done.stdout))

    assert listed("--since", "7d") == {recent.short_id, by_hand.short_id}
    day = time.strftime("%Y-%m-%d", time.localtime((now - 10 * DAY) / 1000))
    assert listed("--since", day) == {recent.short_id, by_hand.short_id}
    assert listed("--since", "60d") == {old.short_id, recent.short_id, by_hand.short_id}
    # The client's name as the page's client menu has it: case folded, without its version.
    assert listed("--client", "claude-code") == {recent.short_id}
    assert listed("--client", "codex", "--since", "7d") == set()
    assert listed("--client=-") == {by_hand.short_id}  # saved by hand
    bad = run(project, "list", "--since", "last week")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert "YYYY-MM-DD" in bad.stderr and "7d" in bad.stderr


def test_projects_are_shown_by_folder_name_and_by_path_under_long(store: SharedStore, project: Path) -> None:
    key = f"project:{project}"
    ident = store.save(key, "uses uv", kind="decision").record.id
    listed = run(project, "list", "--scope", "atlas-web")
    assert "\n(atlas-web · decision) uses uv\n" in listed.stdout and str(project) not in listed.stdout
    found = run(project, "search", "uv")
    assert found.stdout.startswith("找到 1 条记忆(检索范围:atlas-web [来自 DSH_MEMORY_PROJECT], global)")
    got = run(project, "get", ident)
    assert f"(atlas-web · decision) id={ident}" in got.stdout
    for command in (["list"], ["search", "uv"], ["get", ident]):
        full = run(project, *command, "--long")
        assert f"(project:{project} · decision)" in full.stdout, command
    english = run(project, "list", LANG="en_US.UTF-8", LC_ALL="en_US.UTF-8")
    assert "(atlas-web · decision) uses uv" in english.stdout and str(project) not in english.stdout


def test_a_multi_line_memory_is_listed_as_indented_lines_and_english_counts_read_right(
    store: SharedStore, project: Path, tmp_path: Path
) -> None:
    store.save("global", "# Deploy\n- build with make\n  - then push\n\nSee docs.")
    listed = run(project, "list", "--scope", "global")
    assert "\n(global · note) # Deploy\n    - build with make\n      - then push\n    See docs.\n" in listed.stdout
    source = tmp_path / "one-bad.jsonl"
    source.write_text('{"type":"entity","name":"x","observations":["y"]}\nnot json\n', encoding="utf-8")
    english = run(project, "import", "--dry-run", str(source), LANG="en_US.UTF-8", LC_ALL="en_US.UTF-8")
    assert english.returncode == 0, english.stderr
    assert "1 to skip" in english.stderr and "lines" not in english.stderr.split("preview")[-1]
