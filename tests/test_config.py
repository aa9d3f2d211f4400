"""Settings resolution: flags over env over defaults, pure, and creating nothing."""

from __future__ import annotations

import os

import pytest

from dsh_memory_mcp.config import (
    default_store_dir,
    env_flag,
    infer_pooling,
    model_id_from_path,
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
def test_env_flags(value, expected):
    assert env_flag(value) is expected


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


def test_vectors_off_and_unavailable_are_told_apart():
    assert not resolve_vector_settings({"DSH_MEMORY_VECTOR": "Disabled"}, "/").enabled
    v = resolve_vector_settings({}, "/")
    assert v.enabled and not v.usable and "DSH_MEMORY_EMBED_MODEL" in (v.unavailable_reason or "")
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
    assert resolve_vector_settings({"DSH_MEMORY_EMBED_PORT": "70000"}, "/").port == 8199


def test_the_default_store_dir_is_under_home():
    assert default_store_dir({"HOME": "/home/me"}) == os.path.join("/home/me", ".dsh-memory-store")


def test_an_unknown_pooling_value_is_reported_and_inference_is_used_instead():
    v = resolve_vector_settings(
        {"DSH_MEMORY_EMBED_MODEL": "bge-small.gguf", "DSH_MEMORY_EMBED_POOLING": "average"}, "/"
    )
    assert v.invalid_pooling == "average" and v.pooling == "cls"


def test_the_requirements_quoted_in_diagnostics_are_the_ones_pyproject_declares():
    from pathlib import Path

    import tomllib

    from dsh_memory_mcp.config import DEPENDENCIES, SDK_REQUIREMENT

    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    declared = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    assert sorted(declared) == sorted([SDK_REQUIREMENT, *(req for _, req in DEPENDENCIES)])
