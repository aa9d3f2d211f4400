"""Scope keys: custom-name rules, path normalisation, file names and ranks."""

from __future__ import annotations

import hashlib

import pytest

from dsh_memory_mcp.errors import InvalidArgument, ScopeError
from dsh_memory_mcp.store.scopes import normalise_custom_name, normalise_path, scope_file_relpath, scope_rank


@pytest.mark.parametrize(
    ("path", "base", "expected"),
    [
        ("/a/b/../c/./", "/x", "/a/c"),
        ("rel/dir", "/base/proj", "/base/proj/rel/dir"),
        ("..", "/base/proj", "/base"),
        ("//double//slash", "/x", "/double/slash"),
        ("c:\\Users\\me\\app\\", "/x", "C:\\Users\\me\\app"),
        ("D:/dev/./my-app/../app", "/x", "D:\\dev\\app"),
        ("sub", "C:\\work", "C:\\work\\sub"),
    ],
)
def test_paths_are_normalised_without_resolving_symlinks(path, base, expected):
    assert normalise_path(path, base) == expected


@pytest.mark.parametrize("bad", ["", "   ", "a\x00b"])
def test_empty_or_nul_paths_are_path_invalid(bad):
    with pytest.raises(InvalidArgument) as err:
        normalise_path(bad, "/x")
    assert err.value.code == "PATH_INVALID"


def test_custom_names_fold_whitespace_and_case():
    assert normalise_custom_name("  My\tTeam \n Notes ") == "my team notes"
    assert normalise_custom_name("项目 A") == "项目 a"


@pytest.mark.parametrize(
    "bad", ["a:b", "a/b", "a\\b", "a..b", "..", ". .", "global", "Project", "SESSION", "all", "x" * 65, "bell\x07", ""]
)
def test_invalid_custom_names_raise_scope_invalid(bad):
    with pytest.raises(ScopeError) as err:
        normalise_custom_name(bad)
    assert err.value.code == "SCOPE_INVALID"


def test_alias_names_raise_scope_name_invalid():
    with pytest.raises(ScopeError) as err:
        normalise_custom_name("a:b", code="SCOPE_NAME_INVALID")
    assert err.value.code == "SCOPE_NAME_INVALID"


def test_sixty_four_code_points_are_allowed_even_when_wide():
    assert len(normalise_custom_name("记" * 64)) == 64


def test_file_names_are_sha1_of_the_utf8_key_except_global():
    key = "project:/home/me/应用"
    digest = hashlib.sha1(key.encode("utf-8")).hexdigest()
    assert scope_file_relpath(key) == f"projects/{digest}.jsonl"
    assert scope_file_relpath("global") == "global.jsonl"


def test_ranks_order_session_project_custom_global():
    assert [scope_rank(s) for s in ("session:1", "project:/a", "team", "global")] == [0, 1, 2, 3]
