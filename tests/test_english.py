"""Under ``LANG=en_US.UTF-8`` the real commands say nothing in Chinese but memory content.

Every command a person runs — doctor, stats, import (dry run and real), export, recover (dry run),
save, list, search, get, forget, reembed, setup, --help, and start-up failures of the stdio server
and of serve — runs as a subprocess in a store that gives each its Chinese-prone cases (a refused
import line, an overwritten record, a doubtful journal line, a broken scope alias file, a broken host
config, a bad environment value). Its stdout and stderr must hold no CJK character once the memory
contents (and the one documented start-up marker, 已启动, which keeps its Chinese words) are taken out.
The Chinese default of the same commands is what the rest of the suite checks byte for byte.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

import pytest

from dsh_memory_mcp.store.records import Record, parse_lines
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, subprocess_env

CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
#: The start-up success line keeps its Chinese marker under any locale (documented in --help).
MARKER = re.compile(r"已启动 dsh-memory-mcp v[^(]*\((?:stdio|serve,[^)]*)\)")
#: Memory content and tags the store holds (user data: never translated).
CONTENT = ("用户喜欢深色主题", "偏好", "部署用 uv,不用 pip", "旧的便签", "被覆盖的记忆内容", "图谱实体")


def english_env(store: Path, home: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(
        LANG="en_US.UTF-8",
        DSH_MEMORY_STORE_DIR=str(store),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        APPDATA=str(home / "AppData"),
        **extra,
    )


def run(env: dict[str, str], *args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=90,
    )


def chinese_lines(text: str) -> list[str]:
    """The lines that still hold CJK once memory content and the documented marker are removed."""
    out = []
    for line in text.splitlines():
        rest = MARKER.sub("", line)
        for content in CONTENT:
            rest = rest.replace(content, "")
        if CJK.search(rest):
            out.append(line)
    return out


def assert_english(done: subprocess.CompletedProcess[str]) -> None:
    assert done.stdout or done.stderr, done.args  # something was said: an empty run proves nothing
    assert chinese_lines(done.stdout) == [], done.args
    assert chinese_lines(done.stderr) == [], done.args


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    """A store with Chinese memories, an erased record, a doubtful journal line, a broken alias file and
    a leftover tmp; a home with one good and one broken host config."""
    store_dir = tmp_path / "store"
    store = SharedStore(str(store_dir))
    store.prepare()
    store.save("global", "用户喜欢深色主题", kind="preference", tags=["ui", "偏好"])
    store.save("global", "部署用 uv,不用 pip", importance=0.8)
    erased = store.save("global", "被覆盖的记忆内容").record
    doubtful = store.save("global", "旧的便签").record
    for n in range(4):
        store.save(f"project:{tmp_path}", f"note {n}")
    store.close()
    # An unlocked writer rewrote the file without two of our records; a torn journal line names one of them.
    path = Path(store.scope_path("global"))
    kept = [
        line.raw
        for line in parse_lines(path.read_text(encoding="utf-8"))
        if isinstance(line, Record) and line.id not in (erased.id, doubtful.id)
    ]
    path.write_text("".join(f"{raw}\n" for raw in kept) + "not a record\n", encoding="utf-8")
    segment = max((store_dir / ".journal").glob("*.ndjson"))
    with segment.open("ab") as f:
        f.write(b'{"t":1,"op":"save","scope":"global","id":"0000-torn","line":"{\\"id')
        f.write(json.dumps({"t": 2, "op": "forget", "scope": "global", "ids": [doubtful.id]}).encode() + b"\n")
    (store_dir / "scopes.json").write_text("{not json", encoding="utf-8")
    (store_dir / ".global.jsonl.99999999-deadbeef.abcd.tmp").write_text("x", encoding="utf-8")
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": {"dsh-memory": {"command": "/nowhere/dsh"}}}\n', encoding="utf-8")
    (home / ".codeium" / "windsurf").mkdir(parents=True)
    (home / ".claude.json").write_text('{"mcpServers": {,}}', encoding="utf-8")
    graph = "\n".join(
        [
            json.dumps({"type": "entity", "name": "图谱实体", "entityType": "t", "observations": ["fine", ""]}),
            "not json",
            json.dumps({"id": "", "scope": "global", "content": "x"}),
            json.dumps({"type": "entity", "name": "k", "entityType": "t", "observations": ["ghp_" + "a1B2" * 9]}),
            json.dumps({"type": "relation", "from": "a"}),
        ]
    )
    (tmp_path / "import.jsonl").write_text(graph + "\n", encoding="utf-8")
    return {"store": store_dir, "home": home, "root": tmp_path}


def test_the_read_commands_and_doctor_say_nothing_in_chinese_but_memory_content(world: dict[str, Path]):
    env = english_env(world["store"], world["home"], DSH_MEMORY_RELAY="maybe", DSH_MEMORY_EMBED_PORT="x")
    doctor = run(env, "doctor", cwd=world["root"])
    assert_english(doctor)
    assert "result: " in doctor.stdout and "overwritten memories: " in doctor.stdout
    assert "memories in doubt: 1 more memories are missing" in doctor.stdout  # the torn journal line's record
    assert "DSH_MEMORY_RELAY='maybe' is not a switch value" in doctor.stdout
    stats = run(env, "stats", cwd=world["root"])
    assert_english(stats)
    assert "scope aliases" in stats.stdout or "⚠️ the scope alias file" in stats.stdout
    for args in (("list",), ("list", "--json"), ("search", "深色 主题"), ("search", "nothing like it"), ("export",)):
        done = run(env, *args, cwd=world["root"])
        assert done.returncode == 0, done.stderr
        if args[-1] not in ("--json", "export"):  # JSON and the export are data, not sentences
            assert_english(done)
        assert chinese_lines(done.stderr) == [], args
    listed = run(env, "list", cwd=world["root"])
    assert "用户喜欢深色主题" in listed.stdout and "newest first" in listed.stdout  # content kept as it is
    (ident,) = [line.split("id=")[1].split()[0] for line in listed.stdout.splitlines() if "tags=ui,偏好" in line]
    got = run(env, "get", ident, "deadbeefcafe", "abc", cwd=world["root"])
    assert got.returncode == 1  # one id is not there
    assert_english(got)
    assert "source: explicit" not in got.stdout or "Memories found: 1" in got.stdout


def test_the_write_commands_say_nothing_in_chinese_but_memory_content(world: dict[str, Path]):
    env = english_env(world["store"], world["home"])
    cases = [
        (("recover", "--dry-run"), 0),
        (("import", "--dry-run", str(world["root"] / "import.jsonl")), 0),
        (("import", str(world["root"] / "import.jsonl")), 0),
        (("save", "用户喜欢深色主题"), 0),
        (("save", "部署用 uv,不用 pip", "--kind", "bogus"), 2),
        (("save", "token ghp_" + "a1B2" * 9), 3),
        (("save", "x", "--scope", "a/b"), 2),
        (("forget", "--query", "note"), 1),
        (("forget", "deadbeefcafe"), 0),
        (("reembed",), 1),
        (("save",), 2),
        (("lst",), 2),
    ]
    for args, code in cases:
        done = run(env, *args, cwd=world["root"])
        assert done.returncode == code, (args, done.stdout, done.stderr)
        assert_english(done)
    preview = run(env, "recover", "--dry-run", cwd=world["root"])
    assert "would restore 1 overwritten memories" in preview.stdout
    assert "a removal cannot be ruled out" in preview.stdout  # the doubtful record's reason
    confirm = run(env, "forget", "--query", "note", cwd=world["root"])
    assert confirm.returncode == 1 and "nothing was forgotten" in confirm.stderr and "--yes" in confirm.stderr


def test_help_setup_and_start_up_failures_say_nothing_in_chinese(world: dict[str, Path], tmp_path: Path):
    env = english_env(world["store"], world["home"])
    for args in (("--help",), ("serve", "--help"), ("import", "--help"), ("setup", "--dry-run", "cursor")):
        done = run(env, *args, cwd=world["root"])
        assert done.returncode == 0, (args, done.stderr)
        assert_english(done)
    blocked = tmp_path / "a-file"
    blocked.write_text("x", encoding="utf-8")
    stdio = run(english_env(blocked / "store", world["home"]), "--store-dir", str(blocked / "store"))
    assert stdio.returncode == 1
    assert "start-up failed: the memory store directory is unusable" in stdio.stderr
    assert_english(stdio)
    started = run(env, stdin="", cwd=world["root"])
    assert started.returncode == 0, started.stderr
    assert "已启动 dsh-memory-mcp v" in started.stderr and "— started (stdio)" in started.stderr  # the marker kept
    assert_english(started)
    refused = run(env, "serve", "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2 and "refused to start" in refused.stderr
    assert_english(refused)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = run(env, "serve", "--port", str(taken.getsockname()[1]))
    assert busy.returncode == 1 and "cannot listen on" in busy.stderr
    assert_english(busy)


def test_the_tools_texts_for_the_model_stay_chinese_under_an_english_locale(world: dict[str, Path]):
    """The MCP server's answers are written for the model: the locale of the process changes none of them."""
    from tests.helpers.mcp_session import server_params, stdio_session

    params = server_params(world["store"], LANG="en_US.UTF-8")
    with stdio_session(params, world["root"] / "err.log") as session:
        saved = session.call("memory_save", {"content": "the build uses uv"})
        bad = session.call("memory_save", {"content": "x", "kind": "bogus"})
    assert saved.content[0].text.startswith("已保存记忆 ")
    assert bad.is_error and bad.structured_content["message"].startswith("kind 只能是 ")
