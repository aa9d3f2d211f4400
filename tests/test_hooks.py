"""`dsh-memory-mcp hook`: each host's hook run the way the host runs it — a process with the host's
documented JSON on stdin — against a real store and a real `serve`; and `setup` installing the
hooks beside the user's own and taking only ours out again.

Inputs as documented: Claude Code (code.claude.com/docs/en/hooks: `session_id`, `cwd`,
`hook_event_name`, `prompt`), Gemini CLI (geminicli.com/docs/hooks/reference: the same base fields,
`BeforeAgent`), Cursor (cursor.com/docs/agent/hooks: `conversation_id`, `workspace_roots`,
`sessionStart`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_memory_mcp.store.records import new_record
from dsh_memory_mcp.store.scopes import project_key, scope_file_relpath
from tests.conftest import PYTHON, subprocess_env
from tests.helpers.serve_proc import running_serve

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and modes")

RELEVANT = "这个仓库用 uv 管理依赖,不要用 pip 安装"
OTHER = "周五下午不发布生产环境"
RULE = "提交前必须跑完整测试"
PROJECT_NOTE = "本项目的 API 前缀是 /v2"


@pytest.fixture
def world(tmp_path: Path, store_dir: Path) -> dict[str, Path]:
    project = tmp_path / "app"
    project.mkdir()
    pkey = project_key(str(project), "/")
    rows = [
        new_record(scope="global", content=RELEVANT, kind="procedure"),
        new_record(scope="global", content=OTHER, kind="note"),
        new_record(scope="global", content=RULE, kind="rule", importance=0.9),
    ]
    (store_dir / "projects").mkdir(parents=True)
    (store_dir / "global.jsonl").write_text("".join(r.raw + "\n" for r in rows), encoding="utf-8")
    note = new_record(scope=pkey, content=PROJECT_NOTE, kind="decision")
    (store_dir / scope_file_relpath(pkey)).write_text(note.raw + "\n", encoding="utf-8")
    return {"project": project, "store": store_dir, "state": tmp_path / "xdg-state"}


def run_hook(
    store: Path, event: str, payload: bytes | dict[str, Any], *, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[bytes]:
    data = payload if isinstance(payload, bytes) else json.dumps(payload, ensure_ascii=False).encode("utf-8")
    command = [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(store), "hook", event]
    return subprocess.run(command, input=data, capture_output=True, env=subprocess_env(**env), timeout=timeout)


def claude_prompt(project: Path, prompt: str, session: str = "s-1") -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": str(project),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": prompt,
    }


def added(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr
    if not result.stdout.strip():
        return ""
    answer = json.loads(result.stdout)
    if "additional_context" in answer:
        return str(answer["additional_context"])
    return str(answer["hookSpecificOutput"]["additionalContext"])


def log_text(state: Path) -> str:
    logs = list(state.rglob("dsh-memory-mcp.log"))
    return "".join(p.read_text(encoding="utf-8") for p in logs)


# -- direct (no serve) -----------------------------------------------------------------------------


def test_a_claude_code_prompt_gets_the_relevant_memory_once_per_session(world):
    first = run_hook(world["store"], "prompt", claude_prompt(world["project"], "怎么安装依赖?用 uv 还是 pip"))
    answer = json.loads(first.stdout)
    assert answer["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    text = added(first)
    assert RELEVANT in text and OTHER not in text
    # Not again in the same session; again in another one.
    assert added(run_hook(world["store"], "prompt", claude_prompt(world["project"], "uv 和 pip 装依赖"))) == ""
    assert RELEVANT in added(run_hook(world["store"], "prompt", claude_prompt(world["project"], "uv 依赖", "s-2")))
    # The person can see which memories were added: ids in the log file, never their text.
    logged = log_text(world["state"])
    assert "hook prompt" in logged and RELEVANT not in logged and "uv" not in logged
    state_files = list((world["state"]).rglob("hooks/*.json"))
    assert len(state_files) == 2 and all(oct(p.stat().st_mode & 0o777) == "0o600" for p in state_files)


def test_the_prompt_hook_covers_the_working_directorys_project_and_global(world):
    text = added(run_hook(world["store"], "prompt", claude_prompt(world["project"], "API 前缀是什么")))
    assert PROJECT_NOTE in text
    elsewhere = world["project"].parent
    assert PROJECT_NOTE not in added(run_hook(world["store"], "prompt", claude_prompt(elsewhere, "API 前缀", "s-9")))


def test_the_budget_is_held(world):
    rows = [new_record(scope="global", content=f"部署流程第 {i} 步:" + "检查镜像版本与配置 " * 8) for i in range(30)]
    with (world["store"] / "global.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("".join(r.raw + "\n" for r in rows))
    for budget in (200, 600):
        payload = claude_prompt(world["project"], "部署流程 检查镜像版本", session=f"b{budget}")
        text = added(run_hook(world["store"], "prompt", payload, DSH_MEMORY_HOOK_BUDGET=str(budget)))
        assert text and len(text) <= budget, (budget, len(text))
    assert (
        added(run_hook(world["store"], "prompt", claude_prompt(world["project"], "部署"), DSH_MEMORY_HOOK_BUDGET="0"))
        == ""
    )


def test_session_start_gives_the_digest_to_claude_code_gemini_and_cursor(world):
    project = str(world["project"])
    claude = {"session_id": "c", "cwd": project, "hook_event_name": "SessionStart", "source": "startup"}
    gemini = {**claude, "session_id": "g", "timestamp": "2026-12-05T10:00:00Z"}
    cursor = {
        "conversation_id": "k",
        "generation_id": "g1",
        "workspace_roots": [project],
        "hook_event_name": "sessionStart",
    }
    for payload in (claude, gemini, cursor):
        result = run_hook(world["store"], "session-start", payload)
        answer = json.loads(result.stdout)
        text = added(result)
        assert RULE in text and PROJECT_NOTE in text and OTHER not in text
        if payload is cursor:
            assert set(answer) == {"additional_context"}
        else:
            assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    # A digest memory is not repeated by that session's prompts.
    again = added(run_hook(world["store"], "prompt", claude_prompt(world["project"], "提交前要跑测试吗", session="c")))
    assert RULE not in again


def test_gemini_before_agent_gets_hook_specific_output(world):
    payload = {**claude_prompt(world["project"], "安装依赖用 uv 吗"), "hook_event_name": "BeforeAgent"}
    result = run_hook(world["store"], "prompt", payload)
    assert json.loads(result.stdout)["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    assert RELEVANT in added(result)


@pytest.mark.parametrize(
    "payload",
    [b"{not json", b"\xff\xfe\x00bad", b"[1, 2]", b'{"prompt": 5}', b"", b"{" + b" " * (1024 * 1024 + 10) + b"}"],
    ids=["bad-json", "not-utf8", "not-object", "prompt-not-text", "empty", "huge"],
)
def test_bad_input_exits_0_with_nothing(world, payload):
    result = run_hook(world["store"], "prompt", payload)
    assert result.returncode == 0 and result.stdout == b""
    assert b"Traceback" not in result.stderr


def test_an_unusable_store_or_an_unknown_event_exits_0_with_nothing(world, tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x", encoding="utf-8")
    for store in (tmp_path / "missing", not_a_dir):
        result = run_hook(store, "prompt", claude_prompt(world["project"], "uv 依赖"))
        assert result.returncode == 0 and result.stdout == b"" and b"Traceback" not in result.stderr
    assert not (tmp_path / "missing").exists()  # a hook creates no store
    other = run_hook(world["store"], "stop", claude_prompt(world["project"], "uv 依赖"))
    assert other.returncode == 0 and other.stdout == b""


def test_a_stalled_serve_costs_the_timeout_and_adds_nothing(world):
    # A live pid, a trusted serve.json, a port that accepts and never answers.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        info = {
            "url": f"http://127.0.0.1:{listener.getsockname()[1]}/mcp",
            "pid": os.getpid(),
            "token": "t" * 32,
            "version": "0",
            "startedAt": 1,
        }
        path = world["store"] / "serve.json"
        path.write_text(json.dumps(info), encoding="utf-8")
        path.chmod(0o600)
        t0 = time.monotonic()
        result = run_hook(world["store"], "prompt", claude_prompt(world["project"], "uv 依赖"))
        elapsed = time.monotonic() - t0
    assert result.returncode == 0 and result.stdout == b"" and b"Traceback" not in result.stderr
    assert elapsed < 30, elapsed


# -- with serve ------------------------------------------------------------------------------------

_PROBE = """
import sys
from dsh_memory_mcp.cli.main import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(sorted(m for m in ("numpy", "mcp", "httpx", "starlette") if m in sys.modules), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.slow
def test_with_serve_running_the_hook_asks_serve_and_imports_neither_the_sdk_nor_numpy(world, tmp_path):
    with running_serve(world["store"], tmp_path / "serve.log") as serve:
        # A memory saved through serve after it started: the hook's answer comes from serve's view.
        saved = new_record(scope="global", content="发版前先在 staging 环境验证迁移脚本", kind="procedure")
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "memory_save", "arguments": {"content": saved.content, "kind": "procedure"}},
        }
        import httpx

        from tests.helpers.serve_proc import initialize

        with httpx.Client(timeout=20) as http:
            sid = initialize(serve, http)
            http.post(
                serve.url,
                json=body,
                headers=serve.auth(**{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}),
            )
        payload = json.dumps(claude_prompt(world["project"], "staging 环境 迁移脚本 验证"), ensure_ascii=False)
        command = [PYTHON, "-c", _PROBE, "--store-dir", str(world["store"]), "hook", "prompt"]
        result = subprocess.run(command, input=payload.encode(), capture_output=True, env=subprocess_env(), timeout=60)
        budget = run_hook(
            world["store"],
            "prompt",
            claude_prompt(world["project"], "依赖 uv pip", "s-b"),
            DSH_MEMORY_HOOK_BUDGET="120",
        )
        served = serve.stderr()
    assert "发版前先在 staging 环境验证迁移脚本" in added(result)
    assert result.stderr.decode().strip().splitlines()[-1] == "[]"  # no numpy, SDK, httpx or starlette
    text = added(budget)
    assert text and len(text) <= 120
    assert "Traceback" not in served


# -- setup installs them ---------------------------------------------------------------------------

USER_CLAUDE = (
    '{\n  "model": "opus",\n  "hooks": {\n    "UserPromptSubmit": [\n'
    '      {"hooks": [{"type": "command", "command": "~/bin/remind.sh", "timeout": 5}]}\n    ],\n'
    '    "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}]\n  }\n}\n'
)
USER_CURSOR = '{\n  "version": 1,\n  "hooks": {\n    "afterFileEdit": [{"command": "./format.sh"}],\n    "sessionStart": [{"command": "./hello.sh"}]\n  }\n}\n'


def _setup(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = subprocess_env(HOME=str(home), USERPROFILE=str(home), XDG_CONFIG_HOME=str(home / ".config"))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "COPILOT_HOME", "CLINE_MCP_SETTINGS_PATH"):
        env.pop(name, None)
    command = [PYTHON, "-m", "dsh_memory_mcp", "setup", *args]
    return subprocess.run(command, capture_output=True, text=True, encoding="utf-8", env=env, timeout=60)


def test_setup_installs_the_hooks_beside_the_users_own_and_remove_leaves_those_byte_identical(world, tmp_path):
    home = tmp_path / "home"
    files = {
        "claude": home / ".claude" / "settings.json",
        "cursor": home / ".cursor" / "hooks.json",
        "gemini": home / ".gemini" / "settings.json",
    }
    for path in files.values():
        path.parent.mkdir(parents=True)
    files["claude"].write_text(USER_CLAUDE, encoding="utf-8")
    files["cursor"].write_text(USER_CURSOR, encoding="utf-8")
    store = str(world["store"])
    done = _setup(home, "claude-code", "cursor", "gemini", "--store-dir", store)
    assert done.returncode == 0, done.stdout + done.stderr
    claude = json.loads(files["claude"].read_text(encoding="utf-8"))
    cursor = json.loads(files["cursor"].read_text(encoding="utf-8"))
    gemini = json.loads(files["gemini"].read_text(encoding="utf-8"))
    # The user's hooks are all still there, first; ours after them.
    assert claude["hooks"]["UserPromptSubmit"][0] == json.loads(USER_CLAUDE)["hooks"]["UserPromptSubmit"][0]
    assert claude["hooks"]["Stop"] == json.loads(USER_CLAUDE)["hooks"]["Stop"]
    ours = claude["hooks"]["UserPromptSubmit"][1]["hooks"][0]
    # The fast entry (no CLI parser on every prompt), with the store the MCP entry names.
    assert ours["type"] == "command" and ours["command"].endswith(
        f"-m dsh_memory_mcp.cli.hook --store-dir {store} prompt"
    )
    assert claude["hooks"]["SessionStart"][0]["hooks"][0]["command"].endswith("session-start")
    assert cursor["hooks"]["afterFileEdit"] == [{"command": "./format.sh"}]
    assert cursor["hooks"]["sessionStart"][0] == {"command": "./hello.sh"}
    assert cursor["hooks"]["sessionStart"][1]["command"].endswith(f"--store-dir {store} session-start")
    assert "beforeSubmitPrompt" not in cursor["hooks"]  # Cursor cannot add context there
    assert gemini["hooks"]["BeforeAgent"][0]["hooks"][0]["command"].endswith(f"--store-dir {store} prompt")
    assert gemini["hooks"]["BeforeAgent"][0]["hooks"][0]["timeout"] == 10_000  # milliseconds there
    assert gemini["mcpServers"]["dsh-memory"]["args"][-2:] == ["--store-dir", store]

    # What the host would run works: the command line as written, through a shell, JSON on stdin.
    payload = json.dumps(claude_prompt(world["project"], "依赖用 uv 还是 pip"), ensure_ascii=False).encode()
    ran = subprocess.run(
        ours["command"], shell=True, input=payload, capture_output=True, env=subprocess_env(), timeout=60
    )
    assert RELEVANT in added(ran)

    snapshot = {name: path.read_bytes() for name, path in files.items()}
    again = _setup(home, "claude-code", "cursor", "gemini", "--store-dir", store)
    assert again.returncode == 0 and again.stdout.count("钩子已是最新") == 3
    assert {name: path.read_bytes() for name, path in files.items()} == snapshot

    removed = _setup(home, "--remove", "claude-code", "cursor", "gemini")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert files["claude"].read_text(encoding="utf-8") == USER_CLAUDE
    assert files["cursor"].read_text(encoding="utf-8") == USER_CURSOR
    assert "hooks" not in json.loads(files["gemini"].read_text(encoding="utf-8"))


def test_remove_takes_out_our_hooks_whatever_path_or_store_they_name(world, tmp_path):
    home = tmp_path / "home"
    path = home / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    mixed = (
        '{\n  "hooks": {\n    "UserPromptSubmit": [\n'
        '      {"hooks": [{"type": "command", "command": "/old/venv/bin/dsh-memory-mcp --store-dir /x hook prompt"}]},\n'
        '      {"hooks": [{"type": "command", "command": "grep dsh-memory-mcp notes.txt"}]}\n    ]\n  }\n}\n'
    )
    path.write_text(mixed, encoding="utf-8")
    assert _setup(home, "--remove", "claude-code").returncode == 0
    left = json.loads(path.read_text(encoding="utf-8"))["hooks"]["UserPromptSubmit"]
    assert left == [{"hooks": [{"type": "command", "command": "grep dsh-memory-mcp notes.txt"}]}]
