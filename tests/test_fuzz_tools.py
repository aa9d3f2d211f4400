"""Property-based fuzzing of tool arguments, through the official client (in memory: the tools are
what is fuzzed; the stdio transport's own hostile-input tests live in tests/test_stdio_guard.py).

Arbitrary JSON values for every argument of every tool: each call must come back as a result or
a structured error with a spec code other than INTERNAL_ERROR (an unexpected exception), the
server must stay up, and the store must stay parseable. The last test injects a real bug into a
real server and shows that this check catches it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_memory_mcp.errors import ERROR_CODES
from tests.helpers.mcp_session import StdioSession, memory_session, stdio_session

pytestmark = pytest.mark.slow

ARGUMENTS = {
    "memory_save": ["content", "scope", "path", "kind", "tags", "importance", "supersedes"],
    "memory_search": ["query", "scope", "path", "topK"],
    "memory_list": ["scope", "path", "kind", "limit"],
    "memory_get": ["ids"],
    "memory_forget": ["id", "query", "scope", "path"],
}
EXAMPLES_PER_TOOL = 110  # 5 tools × 110 = 550 generated calls

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["global", "project", "session", "all", "*", "note", "rule", "项目", "../..", "a:b", "", " "])
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StdioSession, Path]]:
    root = tmp_path_factory.mktemp("fuzz")
    store = root / "store"
    project = root / "project"
    project.mkdir()
    with memory_session(store, project=project) as session:
        session.call("memory_save", {"content": "seed memory about fuzzing 模糊测试"})
        yield session, store


def _check(session: StdioSession, tool: str, args: dict) -> None:
    result = session.call(tool, args)
    sc = result.structured_content
    assert isinstance(sc, dict), (tool, args, result)
    if result.is_error:
        assert sc["ok"] is False and sc["code"] in ERROR_CODES and sc["message"], (tool, args, sc)
        # A crash is a bug whatever the input: it must never hide behind a coded error.
        assert sc["code"] != "INTERNAL_ERROR", (tool, args, sc)
        assert "Traceback" not in result.content[0].text
    else:
        assert sc["ok"] is True, (tool, args, sc)


def _store_parses(store: Path) -> None:
    for path in store.rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                assert isinstance(json.loads(line), dict)


@pytest.mark.parametrize("tool", sorted(ARGUMENTS))
def test_arbitrary_json_arguments_give_a_result_or_a_coded_error(fuzz_server, tool):
    session, store = fuzz_server

    @settings(
        max_examples=EXAMPLES_PER_TOOL,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        database=None,
    )
    @given(st.fixed_dictionaries({}, optional={name: json_values for name in ARGUMENTS[tool]}))
    def run(args: dict) -> None:
        _check(session, tool, args)

    run()
    # The server is still up and answering, and nothing on disk became unreadable.
    alive = session.call("memory_search", {"query": "fuzzing"})
    assert alive.structured_content["ok"] is True
    _store_parses(store)


def test_the_fuzz_check_fails_on_a_server_with_an_injected_internal_fault(tmp_path):
    """The issue's reproduction: `raise TypeError` in tag parsing used to keep the fuzz test green."""
    from mcp import StdioServerParameters

    from tests.conftest import subprocess_env

    helper = Path(__file__).resolve().parent / "helpers" / "faulty_server.py"
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(helper), "--store-dir", str(tmp_path / "store"), "--project", str(tmp_path)],
        env=subprocess_env(DSH_MEMORY_VECTOR="off"),
        cwd=str(tmp_path),
    )
    with stdio_session(params, tmp_path / "err.log") as session:
        result = session.call("memory_save", {"content": "任何一句话", "tags": ["a"]})
        sc = result.structured_content
        assert result.is_error and sc["code"] == "INTERNAL_ERROR", sc
        assert "Traceback" not in result.content[0].text and "injected fault" not in result.content[0].text
        assert "可能" in sc["message"]  # says what may have happened, not that nothing did
        with pytest.raises(AssertionError):
            _check(session, "memory_save", {"content": "x", "tags": []})
        assert session.call("memory_search", {"query": "x"}).structured_content["ok"] is True  # still up
    logs = list((tmp_path).rglob("dsh-memory-mcp.log"))
    assert logs, "the server wrote no log file"
    text = "".join(p.read_text(encoding="utf-8") for p in logs)
    assert "INTERNAL_ERROR" in text and "Traceback (most recent call last)" in text and "_broken" in text
