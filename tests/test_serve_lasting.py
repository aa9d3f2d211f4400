"""A shared server whose address and token last: serve keeps its token across restarts, `setup --url`
checks the URL it writes, and `setup --serve` installs serve as a login service.

Real `python -m dsh_memory_mcp serve` processes on loopback, stopped with SIGTERM and started again;
real HTTP requests with the header the written host config holds.
"""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest

from dsh_memory_mcp.cli import service
from tests.conftest import PYTHON, subprocess_env
from tests.helpers.fake_llama import free_port
from tests.helpers.serve_proc import running_serve

TIMEOUT = 60


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True, exist_ok=True)
    return home


def _env(home: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), **extra)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=TIMEOUT,
    )


def _cursor_entry(home: Path) -> dict:
    return dict(json.loads((home / ".cursor" / "mcp.json").read_text(encoding="utf-8"))["mcpServers"]["dsh-memory"])


def _health(entry: dict) -> int:
    url = entry["url"].rsplit("/mcp", 1)[0] + "/health"
    return httpx.get(url, headers=entry["headers"], timeout=10).status_code


def _kept_files(tmp_path: Path) -> list[Path]:
    # conftest points XDG_STATE_HOME here: the user's state dir of the test
    return sorted((tmp_path / "xdg-state" / "dsh-memory-mcp" / "serve-tokens").glob("*.json"))


@pytest.mark.slow
def test_a_setup_url_config_keeps_working_after_serve_restarts_and_new_token_retires_it(tmp_path: Path) -> None:
    store, home, port = tmp_path / "store", _home(tmp_path), free_port()
    env = _env(home)
    with running_serve(store, tmp_path / "serve1.err", port=port) as first:
        url = f"http://127.0.0.1:{port}/mcp"
        written = _cli(env, "setup", "cursor", "--store-dir", str(store), "--url", url)
        assert written.returncode == 0, written.stdout + written.stderr
        assert f"✅ 已验证:{url} 上的 serve" in written.stdout
        entry = _cursor_entry(home)
        assert entry["headers"] == {"Authorization": f"Bearer {first.token}"}
        assert _health(entry) == 200
        assert "令牌已保存在" in first.stderr()
        first_token = first.token
    assert not (store / "serve.json").exists()  # it really stopped (SIGTERM, drain, exit)
    [kept] = _kept_files(tmp_path)
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and stat.S_IMODE(kept.parent.stat().st_mode) == 0o700

    with running_serve(store, tmp_path / "serve2.err", port=port) as second:
        assert second.token == first_token
        assert "令牌沿用" in second.stderr()
        assert _health(_cursor_entry(home)) == 200  # the config written against the first serve

    with running_serve(store, tmp_path / "serve3.err", "--new-token", port=port) as third:
        assert third.token != first_token
        assert "已换新令牌" in third.stderr()
        assert _health(_cursor_entry(home)) == 401  # rotated: the old config no longer works
        again = _cli(env, "setup", "cursor", "--store-dir", str(store), "--url", url)
        assert again.returncode == 0 and _health(_cursor_entry(home)) == 200


@pytest.mark.slow
def test_dsh_memory_token_still_wins_and_the_kept_token_is_neither_read_nor_written(tmp_path: Path) -> None:
    store = tmp_path / "store"
    token = "user-set-token-" + "x" * 40
    with running_serve(store, tmp_path / "serve.err", DSH_MEMORY_TOKEN=token) as served:
        assert served.token == token
        assert served.health()["ok"] is True
    assert _kept_files(tmp_path) == []


@pytest.mark.slow
def test_a_kept_token_file_others_can_read_is_not_used(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with running_serve(store, tmp_path / "serve1.err") as first:
        old = first.token
    [kept] = _kept_files(tmp_path)
    kept.chmod(0o644)
    with running_serve(store, tmp_path / "serve2.err") as second:
        assert second.token != old
        assert "没有沿用保存的令牌" in second.stderr() and "同组或其他用户可读写" in second.stderr()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


@pytest.mark.slow
def test_setup_url_warns_when_the_url_is_not_where_the_stores_serve_runs(tmp_path: Path) -> None:
    store, home = tmp_path / "store", _home(tmp_path)
    with running_serve(store, tmp_path / "serve.err") as served:
        wrong = f"http://127.0.0.1:{free_port()}/mcp"
        result = _cli(_env(home), "setup", "cursor", "--store-dir", str(store), "--url", wrong)
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"⚠️ 这个存储目录的 serve 正在 {served.url} 运行" in result.stdout
        assert f"⇒ 改用 --url {served.url}" in result.stdout
        assert f"⚠️ {wrong} 现在没有 serve 在应答" in result.stdout
        other = tmp_path / "other-store"  # the right port, but another store's token
        foreign = _cli(_env(home), "setup", "cursor", "--store-dir", str(other), "--url", served.url)
        assert "不接受这个令牌(HTTP 401)" in foreign.stdout, foreign.stdout


def test_setup_url_before_any_serve_ran_says_so_and_the_help_shows_the_real_default_port(tmp_path: Path) -> None:
    home = _home(tmp_path)
    result = _cli(_env(home), "setup", "cursor", "--url", f"http://127.0.0.1:{free_port()}/mcp")
    assert "⚠️ 没有令牌" in result.stdout and "现在没有 serve 在应答" in result.stdout
    helped = _cli(_env(home), "setup", "--help")
    assert "http://127.0.0.1:7766/mcp" in helped.stdout and "8765" not in helped.stdout
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert "8765" not in readme


# ------------------------------------------------------------------------------------------------
# setup --serve: the login service


ARGV = ["/opt/my tools/bin/dsh-memory-mcp", "serve", "--store-dir", "/home/me/100% mine/$store"]


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed here")
    spec = service.spec("linux", {"HOME": "/home/me"}, [PYTHON, "-m", "dsh_memory_mcp", *ARGV[1:]])
    assert spec.path == "/home/me/.config/systemd/user/dsh-memory-mcp.service"
    unit = tmp_path / "dsh-memory-mcp.service"
    unit.write_bytes(spec.content)
    checked = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, encoding="utf-8", timeout=TIMEOUT)
    assert checked.returncode == 0, checked.stderr
    broken = tmp_path / "broken.service"  # the check is not vacuous: a unit without ExecStart fails it
    broken.write_text("[Service]\nType=simple\n", encoding="utf-8")
    assert subprocess.run([analyze, "verify", str(broken)], capture_output=True, timeout=TIMEOUT).returncode != 0


def test_the_systemd_exec_line_quotes_spaces_and_escapes_percent_and_dollar() -> None:
    text = service.spec("linux", {"HOME": "/home/me"}, ARGV).content.decode("utf-8")
    [line] = [x for x in text.splitlines() if x.startswith("ExecStart=")]
    assert line == 'ExecStart="/opt/my tools/bin/dsh-memory-mcp" serve --store-dir "/home/me/100%% mine/$$store"'
    assert "Restart=on-failure" in text and "WantedBy=default.target" in text and "KillSignal=SIGTERM" in text


def test_the_launchd_agent_is_a_plist_that_runs_serve_at_login() -> None:
    spec = service.spec("darwin", {"HOME": "/Users/me"}, ARGV, uid=501)
    assert spec.path == "/Users/me/Library/LaunchAgents/dev.dsh.memory-mcp.plist"
    agent = plistlib.loads(spec.content)
    assert agent["Label"] == "dev.dsh.memory-mcp"
    assert agent["ProgramArguments"] == ARGV
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["StandardErrorPath"] == "/Users/me/Library/Logs/dsh-memory-mcp-serve.log"
    assert ("launchctl", "bootstrap", "gui/501", spec.path) in spec.install


def test_the_task_scheduler_entry_is_task_xml_with_a_logon_trigger() -> None:
    argv = ["C:\\Program Files\\dsh\\dsh-memory-mcp.exe", "serve", "--store-dir", "C:\\Users\\me\\my store"]
    spec = service.spec(
        "win32", {"USERPROFILE": "C:\\Users\\me", "LOCALAPPDATA": "C:\\Users\\me\\AppData\\Local"}, argv
    )
    assert spec.path.endswith("serve-task.xml") and spec.content.startswith(b"\xff\xfe")  # UTF-16 with its BOM
    ns = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
    root = ET.fromstring(spec.content.decode("utf-16"))
    assert root.find("t:Triggers/t:LogonTrigger/t:Enabled", ns).text == "true"
    assert root.find("t:Actions/t:Exec/t:Command", ns).text == argv[0]
    assert root.find("t:Actions/t:Exec/t:Arguments", ns).text == 'serve --store-dir "C:\\Users\\me\\my store"'
    assert root.find("t:Settings/t:ExecutionTimeLimit", ns).text == "PT0S"
    assert ("schtasks", "/Create", "/TN", "dsh-memory-mcp", "/XML", spec.path, "/F") in spec.install


@pytest.mark.skipif(sys.platform != "linux", reason="setup --serve installs a systemd unit on Linux")
def test_setup_serve_writes_the_unit_enables_it_and_remove_undoes_it(tmp_path: Path) -> None:
    home = _home(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "systemctl.calls"
    fake = bin_dir / "systemctl"  # a real program on PATH that records how it was called
    fake.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\n', encoding="utf-8")
    fake.chmod(0o755)
    env = _env(home, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    store = tmp_path / "store"
    result = _cli(env, "setup", "--serve", "--store-dir", str(store))
    assert result.returncode == 0, result.stdout + result.stderr
    unit = home / ".config" / "systemd" / "user" / "dsh-memory-mcp.service"
    text = unit.read_text(encoding="utf-8")
    assert f"ExecStart={PYTHON} -m dsh_memory_mcp serve --store-dir {store}" in text
    assert calls.read_text(encoding="utf-8").splitlines() == [
        "--user daemon-reload",
        "--user enable --now dsh-memory-mcp.service",
    ]
    removed = _cli(env, "setup", "--serve", "--remove")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert not unit.exists()
    assert calls.read_text(encoding="utf-8").splitlines()[2:] == [
        "--user disable --now dsh-memory-mcp.service",
        "--user daemon-reload",
    ]


@pytest.mark.skipif(sys.platform != "linux", reason="setup --serve installs a systemd unit on Linux")
def test_setup_serve_without_systemctl_writes_the_unit_and_says_what_to_run(tmp_path: Path) -> None:
    home = _home(tmp_path)
    env = _env(home, PATH=str(tmp_path / "empty-bin"))
    env["PATH"] = str(tmp_path / "empty-bin")
    result = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "setup", "--serve", "--store-dir", str(tmp_path / "store")],
        capture_output=True,
        text=True, encoding="utf-8",
        env=env,
        timeout=TIMEOUT,
    )
    assert result.returncode == 1
    assert (home / ".config" / "systemd" / "user" / "dsh-memory-mcp.service").is_file()
    assert "找不到 systemctl,请手动运行:systemctl --user enable --now dsh-memory-mcp.service" in result.stdout


# ------------------------------------------------------------------------------------------------
# doctor sees serve, the relay decision and whether each URL host config gets through


def _doctor(env: dict[str, str], store: Path) -> dict[str, str]:
    result = _cli(env, "doctor", "--store-dir", str(store))
    return {line.split(":", 1)[0]: line for line in result.stdout.splitlines() if ":" in line}


def test_doctor_without_serve_says_stdio_hosts_open_the_store_themselves(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    lines = _doctor(_env(_home(tmp_path)), store)
    assert lines["✅ serve"] == "✅ serve:没有在运行(没有运行中的 serve)"
    assert lines["✅ stdio 宿主"].startswith("✅ stdio 宿主:直连记忆库")


@pytest.mark.slow
def test_doctor_reports_a_running_serve_the_relay_and_a_url_config_whose_token_is_stale(tmp_path: Path) -> None:
    store, home, port = tmp_path / "store", _home(tmp_path), free_port()
    env = _env(home)
    (home / ".codex").mkdir()
    with running_serve(store, tmp_path / "serve1.err", port=port) as first:
        url = first.url
        assert _cli(env, "setup", "cursor", "codex", "--store-dir", str(store), "--url", url).returncode == 0
        lines = _doctor(env, store)
        pid, sessions = first.proc.pid, first.health()["sessions"]
        assert lines["✅ serve"].startswith(f"✅ serve:运行中:{url},pid {pid},v")
        assert f"{sessions} 个会话" in lines["✅ serve"]
        assert lines["✅ stdio 宿主"] == f"✅ stdio 宿主:会中继到 {url}(不打开记忆库、不加载 SDK;--no-relay 可强制直连)"
        assert "令牌有效" in lines["✅ 宿主 Cursor"] and "令牌有效" in lines["✅ 宿主 Codex"]
        relay_off = _doctor({**env, "DSH_MEMORY_RELAY": "off"}, store)
        assert "DSH_MEMORY_RELAY=off" in relay_off["⚠️ stdio 宿主"]
    with running_serve(store, tmp_path / "serve2.err", "--new-token", port=port):
        stale = _doctor(env, store)
        assert "令牌已失效(HTTP 401)" in stale["❌ 宿主 Cursor"]
        assert f"⇒ 重新运行 dsh-memory-mcp setup cursor --url {url}" in stale["❌ 宿主 Cursor"]
    gone = _doctor(env, store)
    assert "现在没有 serve 在应答" in gone["⚠️ 宿主 Cursor"]
