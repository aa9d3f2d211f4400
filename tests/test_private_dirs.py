"""The dirs the product creates for itself (state, logs, digests, serve tokens) are 0700 whatever the umask."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from tests.conftest import PYTHON, subprocess_env

# Under umask 000, in a process of its own (the umask is process-wide): the log file, a digest and a
# serve token, each creating its own part of the user state dir.
_UNDER_UMASK_000 = """
import os, sys
os.umask(0)
from dsh_memory_mcp.cli import logs, serve_token
from dsh_memory_mcp.service import digest
from dsh_memory_mcp.store.shared import SharedStore
store_dir = sys.argv[1]
logs.configure_file_logging()
store = SharedStore(store_dir)
store.prepare()
store.save("global", "a rule", kind="rule")
digest.DigestCache(digest.default_cache_dir(), store_dir).refresh(store, None, 0)
serve_token._write(store_dir, "t" * 40)
"""


def test_state_and_store_dirs_are_private_under_umask_000(tmp_path: Path):
    state = tmp_path / "deep" / "state"
    store_dir = tmp_path / "store"
    proc = subprocess.run(
        [PYTHON, "-c", _UNDER_UMASK_000, str(store_dir)],
        env=subprocess_env(XDG_STATE_HOME=str(state)),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    made = [p for p in [state, *state.rglob("*"), store_dir, *store_dir.rglob("*")] if p.is_dir()]
    assert any(p.name == "digest" for p in made) and (state / "dsh-memory-mcp") in made
    loose = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(os.lstat(p).st_mode)) for p in made}
    assert {k: v for k, v in loose.items() if v != "0o700"} == {}
