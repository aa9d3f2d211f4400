"""Start a real `dsh-memory-mcp serve` for the web tests, read its login link, stop it after.

`running_web` yields a `WebServer` (base URL, token, the one-time login link that `serve` printed on
stderr, store dir); `WebServer.login_url()` asks serve for another (a login link works once). The
process is `python -m dsh_memory_mcp serve --port 0` on loopback with the token in `DSH_MEMORY_TOKEN`; it is ready once `<store>/serve.json` names its pid and the login line is out.
Stopped with SIGTERM (killed if it hangs) in ``finally``.

`page_login(base, token)` does what the page's script does with a pasted token: it exchanges the
token for a page credential (``POST /api/login``) and returns the header to send it in.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import subprocess_env
from tests.helpers.reap import stop_process

START_SECONDS = 30
#: The line `serve` prints once on stderr (cli/serve.py): a one-time login code in the URL's fragment.
LOGIN_LINE = re.compile(r"\[dsh-memory-mcp\] 网页.*?(http://\S+/#code=\S+)")


@dataclass(frozen=True)
class WebServer:
    base: str
    token: str
    #: The login link serve printed at start (works once).
    printed_url: str
    store_dir: Path
    stderr: Path
    proc: subprocess.Popen[str]

    def stderr_text(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])

    def login_url(self) -> str:
        """A fresh one-time login link, as ``dsh-memory-mcp web`` gets it (``POST /api/login-code``)."""
        return f"{self.base}/#code={new_code(self.base, self.token)}"


def new_code(base: str, token: str) -> str:
    """A one-time login code from serve, asked for with the token."""
    r = httpx.post(
        base + "/api/login-code",
        content="{}",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    code: str = r.json()["code"]
    return code


def page_login(base: str, token: str) -> dict[str, str]:
    """The page's login: the token (as a bearer) in, ``{header: credential}`` out."""
    r = httpx.post(
        base + "/api/login",
        content="{}",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Origin": base},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    return {body["header"]: body["credential"]}


def _env(token: str | None, logs: Path, extra: dict[str, str]) -> dict[str, str]:
    # Module-scoped servers start before the per-test env isolation: strip DSH_MEMORY_* here too.
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("DSH_MEMORY_")}
    env.update(DSH_MEMORY_VECTOR="off", XDG_STATE_HOME=str(logs / "xdg-state"))
    if token is not None:
        env["DSH_MEMORY_TOKEN"] = token
    # Access counts of searches are flushed only at exit: a timed flush in the middle of a module would
    # change bytes that tests compare ("nothing written").
    env["DSH_MEMORY_TOUCH_INTERVAL_SECS"] = "86400"
    env.update(extra)
    return env


@contextlib.contextmanager
def running_web(
    store_dir: Path,
    logs: Path,
    *args: str,
    token: str | None = None,
    port: int = 0,
    kept_token: bool = False,
    **env: str,
) -> Iterator[WebServer]:
    """A real `serve` on this store (`port` 0: chosen by the OS), token `token` (default: a new one) in
    `DSH_MEMORY_TOKEN`; `kept_token`: no `DSH_MEMORY_TOKEN`, serve's own kept token (read from serve.json)."""
    token = None if kept_token else token or secrets.token_urlsafe(24)
    errpath = logs / f"serve-{secrets.token_hex(4)}.stderr"
    cmd = [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(store_dir), "--port", str(port), *args]
    with errpath.open("w", encoding="utf-8") as err:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=_env(token, logs, env)
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            text = errpath.read_text(encoding="utf-8", errors="replace")
            assert proc.poll() is None, f"serve exited {proc.returncode}:\n{text}"
            assert time.monotonic() < deadline, f"serve did not start in {START_SECONDS} s:\n{text}"
            try:
                info = json.loads((store_dir / "serve.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                info = None
            login = LOGIN_LINE.search(text)
            if info and info.get("pid") == proc.pid and login:
                break
            time.sleep(0.05)
        base = str(info["url"]).rsplit("/mcp", 1)[0]
        yield WebServer(base, token or str(info["token"]), login.group(1), store_dir, errpath, proc)  # type: ignore[arg-type]
    finally:
        stop_process(proc)


def saved(server: WebServer, scope: str, content: str, **kw: Any) -> str:
    """Save through another process's view of the store (the test process), return the id."""
    from dsh_memory_mcp.store.shared import SharedStore

    store = SharedStore(str(server.store_dir))
    try:
        return store.save(scope, content, **kw).record.id
    finally:
        store.close()


def inserted(server: WebServer, scope: str, records: list[Any]) -> None:
    """Insert ready-made records (another writer's, with their own timestamps) into `scope`."""
    from dsh_memory_mcp.store.shared import SharedStore

    store = SharedStore(str(server.store_dir))
    try:
        store.insert(scope, records)
    finally:
        store.close()


def on_disk(server: WebServer, scope: str = "global") -> dict[str, dict[str, Any]]:
    """id → record of `scope` as the files hold it now."""
    from dsh_memory_mcp.store.shared import SharedStore

    store = SharedStore(str(server.store_dir))
    try:
        return {r.id: r.data for r in store.snapshot(scope).records}
    finally:
        store.close()


def erase_all_but(store_dir: Path, scope: str, keep_id: str) -> Path:
    """Another writer's whole-file rewrite from an old view, without the lock: only `keep_id`'s line
    is left. Returns the scope file."""
    from dsh_memory_mcp.store.scopes import scope_file_relpath

    path = store_dir / scope_file_relpath(scope)
    [keep] = [line for line in path.read_text(encoding="utf-8").splitlines() if keep_id in line]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(keep + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def recover_dry_run(store_dir: Path) -> dict:
    """What ``dsh-memory-mcp recover --dry-run --json`` says (a real subprocess)."""
    cli = subprocess.run(
        [sys.executable, "-m", "dsh_memory_mcp", "recover", "--dry-run", "--json", "--store-dir", str(store_dir)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=subprocess_env(DSH_MEMORY_VECTOR="off"),
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    answer: dict = json.loads(cli.stdout)
    return answer
