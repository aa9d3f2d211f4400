"""`setup` against a host that rewrites its config while setup runs, and on files of other users.

A real writer process (`tests/helpers/config_writer.py`) rewrites a fake ``~/.claude.json`` every
few milliseconds — in place (truncate + write, as Claude Code does) or by rename — adding one entry
each time, working from the disk only; meanwhile the real CLI runs ``setup`` / ``setup --remove``
again and again. Every entry the writer wrote must still be there at the end, and a run that says
✅ must have left its change in the file it reported on.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import PYTHON, subprocess_env

RUNS = 30
TIMEOUT = 60


def _env(home: Path, store: Path) -> dict[str, str]:
    return subprocess_env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), DSH_MEMORY_STORE_DIR=str(store))


def _setup(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "setup", "claude-code", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=TIMEOUT,
    )


def _seed(path: Path) -> None:
    doc = {"numStartups": 3, "mcpServers": {"github": {"command": "npx", "args": ["-y", "gh"]}}, "projects": {}}
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(sys.platform == "win32", reason="POSIX renames over an open file")
@pytest.mark.parametrize("mode", ["inplace", "rename"])
def test_a_host_rewriting_its_config_every_few_ms_loses_no_entry_and_no_run_claims_a_lost_edit(
    tmp_path: Path, mode: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = home / ".claude.json"
    _seed(config)
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [PYTHON, "-m", "tests.helpers.config_writer", str(config), mode, "3", str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True, encoding="utf-8",
        env=subprocess_env(),
        cwd=str(Path(__file__).resolve().parent.parent),
    )
    env = _env(home, tmp_path / "store")
    results = []
    try:
        for i in range(RUNS):
            results.append(_setup(env) if i % 2 == 0 else _setup(env, "--remove"))
            assert writer.poll() is None, writer.communicate()
    finally:
        stop.touch()
        out, err = writer.communicate(timeout=TIMEOUT)
    assert writer.returncode == 0, err
    written = int(out.strip())
    assert written > RUNS  # the host really was writing while setup ran
    doc = json.loads(config.read_text(encoding="utf-8"))
    missing = [n for n in range(written) if f"/p/{n}" not in doc["projects"]]
    assert missing == [], f"{len(missing)} of the host's {written} entries were lost"
    assert doc["mcpServers"]["github"] == {"command": "npx", "args": ["-y", "gh"]}
    for result in results:
        line = next(line for line in result.stdout.splitlines() if "Claude Code" in line)
        assert line[0] in "✅=⚠❌", result.stdout
        assert result.returncode == (0 if line[0] in "✅=" else 1), result.stdout + result.stderr
        assert "Traceback" not in result.stderr


def test_a_file_that_changes_between_reading_and_swapping_is_planned_again_from_the_new_bytes(tmp_path: Path) -> None:
    from dsh_memory_mcp.cli import hostwrite

    path = tmp_path / "mcp.json"
    path.write_bytes(b'{"a": 1}')
    calls: list[bytes | None] = []

    def make(raw: bytes | None) -> bytes | None:
        calls.append(raw)
        if len(calls) == 1:  # the host writes while we prepare our version
            path.write_bytes(b'{"a": 1, "host": "edit"}')
        assert raw is not None
        return raw[:-1] + b', "ours": true}'

    done = hostwrite.replace_config(str(path), make, secret=False, backup_name=lambda t: t + ".bak")
    assert calls == [b'{"a": 1}', b'{"a": 1, "host": "edit"}']
    assert path.read_bytes() == b'{"a": 1, "host": "edit", "ours": true}'
    assert (done.changed, done.restarts) == (True, 1)
    assert Path(done.backup or "").read_bytes() == b'{"a": 1}'  # the bytes the user had before setup


@pytest.mark.skipif(sys.platform != "linux", reason="renameat2(RENAME_EXCHANGE)")
def test_a_host_write_into_our_file_between_the_swap_and_the_swap_back_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An in-place writer that changed the old file before our swap (so we swap back) and opened
    the path — our file, then — in between: its write lands in the file we swapped out again."""
    from dsh_memory_mcp.cli import hostwrite

    path = tmp_path / "mcp.json"
    path.write_bytes(b'{"a": 1}')
    real = hostwrite.exchange
    calls = 0

    def exchange_with_a_host_in_the_gap(a: str, b: str) -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            with open(b, "r+b") as old:  # the host's first write, in place, into the old file
                old.write(b'{"a": 1, "h": 1}')
            done = real(a, b)
            with open(b, "wb") as ours:  # its next one, into whatever the path is now: ours
                ours.write(b'{"a": 1, "h": 1, "h2": 2, "ours": true}')
            return done
        return real(a, b)

    monkeypatch.setattr(hostwrite, "exchange", exchange_with_a_host_in_the_gap)

    def make(raw: bytes | None) -> bytes | None:
        assert raw is not None
        return None if b'"ours"' in raw else raw[:-1] + b', "ours": true}'

    done = hostwrite.replace_config(str(path), make, secret=False, backup_name=lambda t: t + ".bak")
    assert calls >= 2 and done.changed
    assert json.loads(path.read_bytes()) == {"a": 1, "h": 1, "h2": 2, "ours": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp.json", "mcp.json.bak"]


def test_a_file_that_never_stops_changing_is_refused_and_left_as_the_host_wrote_it(tmp_path: Path) -> None:
    from dsh_memory_mcp.cli import hostwrite

    path = tmp_path / "mcp.json"
    path.write_bytes(b"{}")
    n = 0

    def make(raw: bytes | None) -> bytes | None:
        nonlocal n
        n += 1
        path.write_bytes(b'{"n": %d}' % n)  # every attempt loses the race
        return b'{"ours": true}'

    with pytest.raises(hostwrite.Busy):
        hostwrite.replace_config(str(path), make, secret=False, backup_name=lambda t: t + ".bak", sleep=lambda s: None)
    assert path.read_bytes() == b'{"n": %d}' % n and n == hostwrite.MAX_ATTEMPTS
    assert not (tmp_path / "mcp.json.bak").exists()  # no change, so no backup either
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp.json"]  # no tmp left behind


def test_an_empty_file_that_fills_up_a_moment_later_is_not_planned_as_empty(tmp_path: Path) -> None:
    from dsh_memory_mcp.cli import hostwrite

    path = tmp_path / "mcp.json"
    path.write_bytes(b"")
    seen: list[bytes | None] = []
    naps = 0

    def sleep(seconds: float) -> None:  # the host's write lands while we look again
        nonlocal naps
        naps += 1
        if naps == 2:
            path.write_bytes(b'{"host": 1}')

    def make(raw: bytes | None) -> bytes | None:
        seen.append(raw)
        return b'{"host": 1, "ours": 1}' if raw else b'{"ours": 1}'

    hostwrite.replace_config(str(path), make, secret=False, backup_name=lambda t: t + ".bak", sleep=sleep)
    assert seen == [b'{"host": 1}'] and path.read_bytes() == b'{"host": 1, "ours": 1}'


# ------------------------------------------------------------------------------------------------
# owners, groups, modes


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root (CI runs as root)")
def test_setup_as_root_on_another_users_config_keeps_its_owner_group_and_mode(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    uid, gid = 4242, 4343
    os.chown(home, uid, gid)
    os.chown(home / ".cursor", uid, gid)
    config = home / ".cursor" / "mcp.json"
    config.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    os.chown(config, uid, gid)
    config.chmod(0o600)
    result = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "setup", "cursor", "codex"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(home, tmp_path / "store"),
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    st = config.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, 0o600)
    assert "dsh-memory" in json.loads(config.read_text(encoding="utf-8"))["mcpServers"]
    [backup] = (home / ".cursor").glob("mcp.json.dsh-memory-mcp-*.bak")
    bst = backup.stat()
    assert (bst.st_uid, bst.st_gid, stat.S_IMODE(bst.st_mode)) == (uid, gid, 0o600)
    # Codex had no file: created as root inside the user's home, it goes to the user too.
    codex = home / ".codex" / "config.toml"
    for made in (home / ".codex", codex):
        assert (made.stat().st_uid, made.stat().st_gid) == (uid, gid), made


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to make another user")
def test_setup_run_by_another_user_on_a_file_it_does_not_own_refuses_and_writes_nothing(tmp_path: Path) -> None:
    def reachable(path: Path) -> bool:  # every directory above it searchable by others
        return all(os.stat(p).st_mode & 0o001 for p in Path(path).resolve().parents)

    if not reachable(Path(PYTHON)) or not reachable(tmp_path / "x"):
        pytest.skip("the interpreter or the temp dir is not reachable for another uid on this machine")
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    os.chmod(home, 0o777)
    os.chmod(home / ".cursor", 0o777)
    config = home / ".cursor" / "mcp.json"
    config.write_text('{"mcpServers": {}}\n', encoding="utf-8")
    os.chown(config, 4242, 4242)
    config.chmod(0o666)
    before = config.read_bytes()
    result = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "setup", "cursor"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=_env(home, tmp_path / "store"),
        timeout=TIMEOUT,
        user=4343,
    )
    assert result.returncode == 1
    assert "属于另一个用户(uid 4242)" in result.stdout
    assert config.read_bytes() == before and config.stat().st_uid == 4242


def test_the_replaced_files_mode_is_kept_and_a_token_makes_it_0600(tmp_path: Path) -> None:
    from dsh_memory_mcp.cli import hostwrite

    path = tmp_path / "mcp.json"
    path.write_bytes(b"{}")
    path.chmod(0o640)
    hostwrite.replace_config(str(path), lambda raw: b'{"a": 1}', secret=False, backup_name=lambda t: t + ".bak")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    hostwrite.replace_config(str(path), lambda raw: b'{"a": 2}', secret=True, backup_name=lambda t: t + ".2.bak")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_time_is_not_spent_waiting_on_a_quiet_file(tmp_path: Path) -> None:
    from dsh_memory_mcp.cli import hostwrite

    path = tmp_path / "mcp.json"
    path.write_bytes(b"{}")
    naps: list[float] = []
    started = time.monotonic()
    hostwrite.replace_config(
        str(path), lambda raw: b'{"a": 1}', secret=False, backup_name=lambda t: t + ".bak", sleep=naps.append
    )
    assert naps == [] and time.monotonic() - started < 5
