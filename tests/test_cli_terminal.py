"""The human CLI at a terminal and off one: colour (and NO_COLOR), the pager, progress with percent
and ETA, no program prefix and no recover reminder on a person's own commands, and `duplicates`.

What depends on a terminal runs the real program with its stdout or stderr on a pseudo-terminal
(`os.openpty`); the rest calls `cli.main` in-process."""

from __future__ import annotations

import io
import json
import os
import select
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_memory_mcp.cli import commands
from dsh_memory_mcp.cli import main as cli
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, subprocess_env

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no pty on Windows")

ESC = "\x1b["


def _pty(rows: int, cols: int = 120) -> tuple[int, int]:
    import fcntl
    import struct
    import termios

    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return leader, follower


def run(
    args: list[str],
    env: dict[str, str],
    tmp_path: Path,
    *,
    out_tty: bool = False,
    err_tty: bool = False,
    rows: int = 24,
) -> tuple[str, str, int]:
    """The CLI with stdout and/or stderr on a pty (else a file); returns (stdout, stderr, exit code)."""
    leaders: dict[int, str] = {}
    streams: dict[str, int | io.BufferedWriter] = {}
    files: dict[str, Path] = {}
    for name, tty in (("out", out_tty), ("err", err_tty)):
        if tty:
            leader, follower = _pty(rows)
            leaders[leader] = name
            streams[name] = follower
        else:
            files[name] = tmp_path / f"std{name}.txt"
            streams[name] = open(files[name], "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [PYTHON, "-m", "dsh_memory_mcp", *args],
        stdin=subprocess.DEVNULL,
        stdout=streams["out"],
        stderr=streams["err"],
        env=env,
    )
    for stream in streams.values():
        if isinstance(stream, int):
            os.close(stream)
        else:
            stream.close()
    got = {"out": b"", "err": b""}
    open_leaders = set(leaders)
    while open_leaders:
        ready, _, _ = select.select(list(open_leaders), [], [], 60)
        assert ready, "the command went quiet without ending"
        for leader in ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every follower is closed
                chunk = b""
            if chunk:
                got[leaders[leader]] += chunk
            else:
                open_leaders.discard(leader)
                os.close(leader)
    code = proc.wait(timeout=60)
    for name, path in files.items():
        got[name] = path.read_bytes()
    out, err = (got[n].decode("utf-8").replace("\r\n", "\n") for n in ("out", "err"))
    return out, err, code


@pytest.fixture
def env(store_dir: Path) -> dict[str, str]:
    result = subprocess_env(DSH_MEMORY_STORE_DIR=str(store_dir), DSH_MEMORY_VECTOR="off", TERM="xterm")
    for name in ("NO_COLOR", "PAGER", "DSH_MEMORY_PAGER", "LESS"):
        result.pop(name, None)
    return result


@pytest.fixture
def saved(store: SharedStore) -> list[str]:
    contents = [
        "# Deploy\n- run **tests** first\n- then `make deploy`",
        "Use pnpm, not npm",
        "red \x1b[31mRED\x1b[0m bell\x07",
    ]
    return [store.save("global", text).record.id for text in contents]


def test_colour_on_a_terminal_and_none_under_no_color_or_in_a_pipe(env, saved, tmp_path):
    env["DSH_MEMORY_PAGER"] = "off"
    out, _err, code = run(["list", "--scope", "global"], env, tmp_path, out_tty=True)
    assert code == 0
    assert f"{ESC}36m(global · note){ESC}0m" in out  # the scope · kind head
    assert f"{ESC}33m{saved[1][:8]}{ESC}0m" in out  # the id
    assert f"{ESC}1m# Deploy{ESC}0m" in out and f"{ESC}1m**tests**{ESC}0m" in out  # markdown stays, marked up
    # A memory's own escape sequence and bell are shown, never obeyed by the terminal.
    assert "red \\x1b[31mRED\\x1b[0m bell\\x07" in out and "\x07" not in out

    for value in ("1", "yes"):  # https://no-color.org: any non-empty value
        plain, _err, code = run(["list", "--scope", "global"], {**env, "NO_COLOR": value}, tmp_path, out_tty=True)
        assert code == 0 and "Use pnpm, not npm" in plain
        assert "\x1b" not in plain.replace("\\x1b", "")
    _out, err, code = run(["list", "--scope", "nowhere"], env, tmp_path, err_tty=True)
    assert code == 2 and err.startswith(f"{ESC}31m❌ 参数错误:没有叫 nowhere 的作用域")  # an error in red
    _out, err, code = run(["list", "--scope", "nowhere"], {**env, "NO_COLOR": "1"}, tmp_path, err_tty=True)
    assert code == 2 and err.startswith("❌ 参数错误:") and "\x1b" not in err
    piped, _err, code = run(["list", "--scope", "global"], env, tmp_path)
    assert code == 0 and "(global · note) Use pnpm, not npm" in piped
    # Off a terminal the bytes are the memory's own (a script gets what was saved), and no colour.
    assert piped.count("\x1b") == 2 and "\x1b[36m" not in piped


def _pager(tmp_path: Path) -> tuple[str, Path]:
    seen = tmp_path / "paged.txt"
    script = "import sys; open(sys.argv[1], 'wb').write(sys.stdin.buffer.read())"
    return shlex.join([PYTHON, "-c", script, str(seen)]), seen


def test_a_long_list_on_a_terminal_goes_through_the_pager_and_never_when_piped_or_turned_off(
    env, store_dir, tmp_path
):
    ticks = iter(range(1_790_000_000_000, 1_790_000_000_100))
    store = SharedStore(str(store_dir), clock=lambda: next(ticks))  # one millisecond per save: no ties
    store.prepare()
    for n in range(12):
        store.save("global", f"memory number {n}")
    store.close()
    env["PAGER"], seen = _pager(tmp_path)

    out, _err, code = run(["list", "--scope", "global"], env, tmp_path, out_tty=True, rows=10)
    assert code == 0 and out == ""  # all of it went to the pager
    paged = seen.read_text(encoding="utf-8")
    assert "memory number 0" in paged and "memory number 11" in paged and ESC in paged  # colour passes to it
    seen.unlink()

    short, _err, code = run(["list", "--scope", "global", "--limit", "1"], env, tmp_path, out_tty=True, rows=10)
    # Fits the screen: printed, the newest.
    assert code == 0 and "memory number 11" in short and "还有 11 条" in short and not seen.exists()

    for args, extra in ((["--no-pager"], {}), ([], {"DSH_MEMORY_PAGER": "off"}), ([], {})):
        tty = bool(args or extra)
        out, _err, code = run(["list", "--scope", "global", *args], {**env, **extra}, tmp_path, out_tty=tty, rows=10)
        assert code == 0 and "memory number 0" in out and not seen.exists(), (args, extra, tty)
        if not tty:
            assert "\x1b" not in out  # piped: no escape codes either

    (tmp_path / "own").mkdir()
    own, seen_own = _pager(tmp_path / "own")
    _out, _err, code = run(
        ["search", "memory", "--top-k", "20"], {**env, "DSH_MEMORY_PAGER": own}, tmp_path, out_tty=True, rows=5
    )
    assert code == 0 and "memory number" in seen_own.read_text(encoding="utf-8")  # DSH_MEMORY_PAGER before PAGER
    assert not seen.exists()


def test_import_and_export_draw_progress_on_a_terminal_only(env, tmp_path):
    lines = [
        json.dumps(
            {
                "id": f"00000000-0000-4000-8000-{n:012d}",
                "scope": "global",
                "content": f"imported {n}",
                "createdAt": 1_600_000_000_000 + n,
                "updatedAt": 1_600_000_000_000 + n,
            }
        )
        for n in range(2000)
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _out, err, code = run(["import", str(source)], env, tmp_path, err_tty=True)
    assert code == 0, err
    assert "\r导入 100% [" in err and "导入完成:新增 2000 条" in err
    assert "[dsh-memory-mcp]" not in err  # a person's own command: no program prefix

    _out, err, code = run(["import", str(source)], env, tmp_path)  # piped stderr: no progress at all
    assert code == 0 and err == "导入完成:新增 0 条,已存在 2000 条,跳过 0 行\n"

    out, err, code = run(["export"], env, tmp_path, err_tty=True)
    assert code == 0 and "\r导出 100% [" in err and out.count("\n") == 2000
    # import kept the times of the file
    assert '"createdAt": 1600000000000' in out or '"createdAt":1600000000000' in out
    out, err, code = run(["export"], env, tmp_path)
    assert code == 0 and "\r" not in err and "%" not in err


def test_progress_shows_percent_counts_and_an_eta_and_redraws_at_most_ten_times_a_second():
    leader, follower = _pty(24)
    now = [100.0]
    try:
        with open(follower, "w", encoding="utf-8", closefd=False) as tty:
            bar = commands.Progress(tty, "导入", clock=lambda: now[0])
            bar(0, 400)
            now[0] += 0.05
            bar(10, 400)  # within a tenth of a second: not drawn
            now[0] += 1.95
            bar(100, 400)  # a quarter in 2 s: 6 s left
            bar(400, 400)  # the end is always drawn
            bar.finish()
        written = b""
        while not written.endswith(b"\n"):
            ready, _, _ = select.select([leader], [], [], 10)
            assert ready, written
            written += os.read(leader, 4096)
    finally:
        os.close(leader)
        os.close(follower)
    frames = written.decode("utf-8").replace("\r\n", "\n").split("\r")[1:]
    bars = [frame.replace("\x1b[K", "") for frame in frames]
    assert bars == [
        "导入   0% [..............................] 0/400",
        "导入  25% [#######.......................] 100/400 剩余 0:06",
        "导入 100% [##############################] 400/400\n",
    ]
    plain = io.StringIO()
    silent = commands.Progress(plain, "导入")
    silent(1, 2)
    silent.finish()
    assert plain.getvalue() == ""


def test_duplicates_lists_the_pages_groups_and_says_replacing_is_an_action(store, store_dir, capsys):
    a = store.save("global", "Use pnpm, not npm, in every repo").record
    b = store.save("global", "use pnpm not npm in every repo!").record
    store.save("global", "The staging database is read-only on Fridays")
    assert cli.main(["duplicates", "--store-dir", str(store_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 组内容几乎相同的记忆")
    assert f"id={a.short_id}" in out and f"id={b.short_id}" in out and "staging" not in out
    assert "edit" in out and "--supersedes" in out and "保留这条,替换其余" in out

    assert cli.main(["duplicates", "--json", "--store-dir", str(store_dir)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["total"] == 1 and [r["id"] for r in data["groups"][0]["records"]] == [b.id, a.id]
    assert store.snapshot("global").records[-1].content.startswith("The staging")  # nothing was changed

    store.save("custom-notes", "only one here")
    assert cli.main(["duplicates", "--scope", "custom-notes", "--store-dir", str(store_dir)]) == 0
    assert capsys.readouterr().out.startswith("没有内容几乎相同的记忆(范围:custom-notes)")


def test_list_says_no_recover_reminder_and_no_prefix_while_stats_still_reports_the_loss(store, store_dir, capsys):
    kept = store.save("global", "kept memory").record
    lost = store.save("global", "erased memory").record
    path = Path(store.scope_path("global"))
    path.write_text(kept.raw + "\n", encoding="utf-8")  # an unlocked writer's rewrite without `lost`
    assert cli.main(["list", "--scope", "global", "--store-dir", str(store_dir)]) == 0
    listed = capsys.readouterr()
    assert "kept memory" in listed.out and "recover" not in listed.err
    assert cli.main(["stats", "--store-dir", str(store_dir)]) == 0
    stats = capsys.readouterr()
    assert "少了 1 条" in stats.out and "recover" in stats.out and stats.err.count("recover") == 0
    assert lost.id not in listed.out
    assert cli.main(["list", "--scope", "nowhere", "--store-dir", str(store_dir)]) == 2
    assert capsys.readouterr().err.startswith("❌ 参数错误:没有叫 nowhere 的作用域")  # no program prefix
