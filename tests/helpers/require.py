"""One rule for tests that need something a developer's machine may lack: skip there, fail in CI.

`require(condition, why)` is the only place that decides. CI (`CI=true`, which `.ci/run` exports) must run
every test it can: a missing browser, Node package or model there is a broken CI setup, not a reason to pass.
"""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    """True under CI (`CI=true`, as `.ci/run` exports it)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def require(condition: object, why: str) -> None:
    """Continue when `condition` holds; otherwise skip the test locally and fail it in CI, saying `why`."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"{why} (CI must run this test)")
    pytest.skip(why)
