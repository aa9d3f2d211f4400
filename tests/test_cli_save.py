"""`dsh-memory-mcp save`: a memory added by hand, through `memory_save` itself, as a real subprocess.

Each case runs ``python -m dsh_memory_mcp save …`` against a temp store and reads the store back with
a `SharedStore` of its own; expected codes and exit codes are written out here, never computed by
the code under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, subprocess_env

P = "[dsh-memory-mcp] "
TIMEOUT = 60


def save(project: Path, *args: str, stdin: bytes = b"", **env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "save", *args],
        input=stdin,
        capture_output=True,
        env=subprocess_env(DSH_MEMORY_PROJECT=str(project), **env),
        cwd=str(project),
        timeout=TIMEOUT,
    )
    return subprocess.CompletedProcess(result.args, result.returncode, result.stdout.decode(), result.stderr.decode())


@pytest.fixture
def project(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def live(store_dir: Path) -> list[dict]:
    store = SharedStore(str(store_dir))
    try:
        return [r.data for scope in store.discover_scopes() for r in store.snapshot(scope).records]
    finally:
        store.close()


def test_save_prints_the_new_id_on_stdout_and_the_record_has_every_option(project: Path, store_dir: Path) -> None:
    result = save(
        project,
        "用户喜欢深色主题",
        "--kind",
        "preference",
        "--tags",
        "ui,偏好",
        "--importance",
        "0.8",
        "--scope",
        "project",
    )
    assert result.returncode == 0, result.stderr
    ident = result.stdout.strip()
    assert result.stdout == ident + "\n" and len(ident) == 36
    [record] = live(store_dir)
    assert record["id"] == ident
    assert record["content"] == "用户喜欢深色主题"
    assert record["kind"] == "preference"
    assert record["tags"] == ["ui", "偏好"]
    assert record["importance"] == 0.8
    assert record["scope"] == f"project:{project}"
    assert record["source"] == {"origin": "explicit", "client": "cli"}
    assert result.stderr == f"已保存记忆 {ident[:8]} @ project:{project} [来自 DSH_MEMORY_PROJECT]\n"


def test_save_of_content_already_there_prints_the_existing_id_and_exits_0(project: Path, store_dir: Path) -> None:
    first = save(project, "the build uses uv")
    again = save(project, "the build uses uv")
    assert (first.returncode, again.returncode) == (0, 0)
    assert again.stdout == first.stdout
    assert "记忆已存在(内容相同),未重复保存" in again.stderr
    assert len(live(store_dir)) == 1


def test_save_json_prints_the_tools_structured_result(project: Path, store_dir: Path) -> None:
    result = save(project, "standup is at 9:30", "--kind", "fact", "--json")
    assert result.returncode == 0 and result.stderr == ""
    answer = json.loads(result.stdout)
    [record] = live(store_dir)
    assert answer == {"ok": True, "id": record["id"], "deduped": False, "scope": "global", "kind": "fact"}


def test_save_dash_reads_the_content_from_standard_input(project: Path, store_dir: Path) -> None:
    text = "多行的记忆\n第二行 with English\n"
    result = save(project, "-", "--tags", "stdin", stdin=text.encode("utf-8"))
    assert result.returncode == 0, result.stderr
    [record] = live(store_dir)
    assert record["content"] == text.strip() and record["tags"] == ["stdin"]
    assert result.stdout.strip() == record["id"]


def test_content_starting_with_a_dash_goes_after_a_double_dash(project: Path, store_dir: Path) -> None:
    result = save(project, "--kind", "rule", "--", "-5 度以下不跑步")
    assert result.returncode == 0, result.stderr
    [record] = live(store_dir)
    assert (record["content"], record["kind"]) == ("-5 度以下不跑步", "rule")


# Every refusal memory_save gives, with the exit code the CLI documents for it.
REFUSALS = [
    pytest.param(["   "], {}, "CONTENT_EMPTY", 3, id="blank content"),
    pytest.param(["x" * 101], {"DSH_MEMORY_MAX_CONTENT": "100"}, "CONTENT_TOO_LONG", 3, id="too long"),
    pytest.param(["key sk-proj-" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5"], {}, "CONTENT_SECRET", 3, id="a credential"),
    pytest.param(
        ["ok", "--tags", "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"], {}, "CONTENT_SECRET", 3, id="secret tag"
    ),
    pytest.param(["ok", "--tags", ",".join(f"t{i}" for i in range(33))], {}, "TAGS_INVALID", 2, id="33 tags"),
    pytest.param(["ok", "--tags", "x" * 65], {}, "TAGS_INVALID", 2, id="long tag"),
    pytest.param(["ok", "--kind", "bogus"], {}, "KIND_INVALID", 2, id="kind"),
    pytest.param(["ok", "--importance", "1.5"], {}, "IMPORTANCE_RANGE", 2, id="importance 1.5"),
    pytest.param(["ok", "--importance", "high"], {}, "IMPORTANCE_RANGE", 2, id="importance word"),
    pytest.param(["ok", "--scope", "all"], {}, "SCOPE_NOT_WRITABLE", 2, id="scope all"),
    pytest.param(["ok", "--scope", "project:"], {}, "SCOPE_INVALID", 2, id="scope project:"),
    pytest.param(["ok", "--scope", "global", "--path", "/tmp"], {}, "PATH_SCOPE_CONFLICT", 2, id="scope and path"),
]


@pytest.mark.parametrize(("args", "env", "code", "exit_code"), REFUSALS)
def test_each_refusal_has_memory_saves_code_and_the_documented_exit_code_and_writes_nothing(
    project: Path, store_dir: Path, args: list[str], env: dict[str, str], code: str, exit_code: int
) -> None:
    text = save(project, *args, **env)
    assert text.returncode == exit_code, text.stderr
    assert text.stdout == ""
    assert text.stderr.startswith(f"错误 {code}:"), text.stderr
    as_json = save(project, *args, "--json", **env)
    assert as_json.returncode == exit_code
    answer = json.loads(as_json.stdout)
    assert answer["ok"] is False and answer["code"] == code and answer["message"]
    assert live(store_dir) == [] if store_dir.exists() else True
    if code == "CONTENT_SECRET":  # the credential is never echoed
        assert args[-1] not in text.stderr + as_json.stdout


@pytest.mark.parametrize(
    "argv",
    [pytest.param([], id="no content"), pytest.param(["two", "words"], id="two words"), ["x", "--colour", "red"]],
)
def test_a_bad_command_line_exits_2_and_writes_nothing(project: Path, store_dir: Path, argv: list[str]) -> None:
    result = save(project, *argv)
    assert result.returncode == 2 and result.stdout == ""
    assert "参数错误" in result.stderr
    assert not store_dir.exists()


def test_standard_input_that_is_not_utf8_is_refused_with_exit_3(project: Path, store_dir: Path) -> None:
    result = save(project, "-", stdin=b"caf\xe9 au lait")
    assert result.returncode == 3
    assert "标准输入不是 UTF-8 文本(第 3 个字节起)" in result.stderr
    assert not store_dir.exists() or live(store_dir) == []


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")
def test_an_endless_standard_input_is_refused_as_too_long_without_reading_it_all(
    project: Path, store_dir: Path
) -> None:
    # `yes | save -`: the CLI must stop reading once the content is surely too long.
    producer = subprocess.Popen(["yes", "很长的内容"], stdout=subprocess.PIPE)
    try:
        result = subprocess.run(
            [PYTHON, "-m", "dsh_memory_mcp", "save", "-", "--json"],
            stdin=producer.stdout,
            capture_output=True,
            env=subprocess_env(DSH_MEMORY_PROJECT=str(project), DSH_MEMORY_MAX_CONTENT="1000"),
            timeout=TIMEOUT,
        )
    finally:
        assert producer.stdout is not None
        producer.stdout.close()
        producer.kill()
        producer.wait()
    assert result.returncode == 3
    assert json.loads(result.stdout)["code"] == "CONTENT_TOO_LONG"
    assert not store_dir.exists() or live(store_dir) == []


def test_add_suggests_save_and_save_help_documents_the_exit_codes(project: Path) -> None:
    add = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "add", "用户喜欢深色主题"],
        capture_output=True,
        text=True, encoding="utf-8",
        env=subprocess_env(),
        timeout=TIMEOUT,
    )
    assert add.returncode == 2
    assert f"{P}⇒ 你是不是想用子命令 save?" in add.stderr.splitlines()
    helped = subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", "save", "--help"], capture_output=True, text=True, encoding="utf-8", env=subprocess_env()
    )
    assert helped.returncode == 0
    assert "3 内容被拒绝" in helped.stdout and "--importance" in helped.stdout
