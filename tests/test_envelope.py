"""The scale envelope (docs/design.md): a stdio server that opens the store itself is meant for
scopes of up to `config.DIRECT_LIMIT` records. Past it, the process still answers correctly and
says once on stderr that `serve` would make it fast; `doctor` says it too while no serve runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dsh_memory_mcp import config
from dsh_memory_mcp.cli import doctor
from dsh_memory_mcp.store import scopes
from tests.helpers.mcp_session import server_params, stdio_session

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX stdio server")

MARKED = 12_345  # the position of the one record the search must find


def write_scope(store_dir: Path, scope: str, n: int) -> Path:
    """`n` records of `scope` as raw JSONL lines (another writer's), one of them marked."""
    path = store_dir / scopes.scope_file_relpath(scope)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        content = "独一无二 zebracorn marker" if i == MARKED else f"第 {i} 条 record {i} 部署流水线 {i % 97}"
        data = {"id": f"env-{i:06d}", "scope": scope, "kind": "note", "content": content, "tags": [], "createdAt": 1}
        lines.append(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_a_direct_stdio_server_past_the_limit_answers_correctly_and_says_once_that_serve_would_be_fast(
    tmp_path: Path, store_dir: Path
):
    write_scope(store_dir, scopes.GLOBAL, config.DIRECT_LIMIT + 1)
    project = tmp_path / "work"
    project.mkdir()
    errlog = tmp_path / "host.log"
    with stdio_session(server_params(store_dir, project=project), errlog) as host:
        found = host.call("memory_search", {"query": "zebracorn marker", "scope": "global"})
        assert not found.is_error
        assert [r["id"] for r in found.structured_content["records"]][:1] == [f"env-{MARKED:06d}"]
        saved = host.call("memory_save", {"content": "过了直连上限也照常保存 saved past the limit", "scope": "global"})
        assert not saved.is_error and saved.structured_content["deduped"] is False
        again = host.call("memory_save", {"content": "第 7 条 record 7 部署流水线 7", "scope": "global"})
        assert again.structured_content["deduped"] is True and again.structured_content["id"] == "env-000007"
        assert (
            host.call("memory_search", {"query": "saved past the limit", "scope": "global"}).structured_content["count"]
            >= 1
        )
    lines = (store_dir / "global.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == config.DIRECT_LIMIT + 2
    said = [line for line in errlog.read_text(encoding="utf-8").splitlines() if "dsh-memory-mcp setup --serve" in line]
    assert len(said) == 1, said
    assert "dsh-memory-mcp serve" in said[0] and str(config.DIRECT_LIMIT + 1) in said[0]


def _stdio_check(tmp_path: Path, store_dir: Path) -> doctor.Check:
    settings = config.resolve_settings(
        store_dir=str(store_dir), env={"HOME": str(tmp_path / "home")}, cwd=str(tmp_path)
    )
    checks = doctor.run_checks(settings, env={"HOME": str(tmp_path / "home")})
    (check,) = [c for c in checks if c.title == "stdio 宿主"]
    return check


def test_doctor_says_serve_would_be_fast_when_a_scope_is_past_the_direct_limit_and_no_serve_runs(
    tmp_path: Path, store_dir: Path
):
    project_scope = scopes.project_key("/work/big", "/")
    path = write_scope(store_dir, project_scope, config.DIRECT_LIMIT)
    write_scope(store_dir, scopes.GLOBAL, 10)
    at_limit = _stdio_check(tmp_path, store_dir)
    assert at_limit.status == "ok" and "setup --serve" in at_limit.detail and at_limit.fix is None
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "one-more", "scope": project_scope, "kind": "note", "content": "one more"}) + "\n")
    past = _stdio_check(tmp_path, store_dir)
    assert past.status == "warn"
    assert scopes.scope_file_relpath(project_scope) in past.detail and str(config.DIRECT_LIMIT + 1) in past.detail
    assert past.fix is not None and "setup --serve" in past.fix and "serve" in past.fix
    assert "⚠️" in doctor.render(past) and "⇒" in doctor.render(past)
