"""`dsh-memory-mcp hook session-start|prompt`: memory that reaches the model by itself, through a
host's hooks (`hosts.HOOK_FILES`).

The host runs the command with its JSON on stdin and adds what we print to the model's context: at
session start the digest, on each prompt the memories relevant to it (the working directory's project
and global) within `DSH_MEMORY_HOOK_BUDGET` characters, never one this session already got (a state
file per session, 0600, pruned after `STATE_DAYS`). A trusted running `serve` answers over a plain
socket, so the hook imports neither the SDK, numpy nor the CLI's parser (``python -m
dsh_memory_mcp.cli.hook`` is the entry `setup` writes); otherwise the store is read directly, lexical
only. Never in the way: any problem → exit 0, nothing printed. The log file gets the injected ids.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import socket
import sys
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from dsh_memory_mcp import __version__, config

if TYPE_CHECKING:
    from dsh_memory_mcp.cli.parser import Invocation

EVENTS = ("session-start", "prompt")
#: The host's JSON on stdin is read up to this size; more is bad input.
MAX_INPUT = 1024 * 1024
#: The whole exchange with `serve` (connect, answer) may take this long.
SERVE_TIMEOUT = 2.0
#: A prompt's search: this many candidates before the budget and the session's memory cut them.
TOP_K = 10
#: A session's state file is removed this long after its last write.
STATE_DAYS = 7
#: What our client calls itself in `serve`'s provenance and logs.
CLIENT = "dsh-memory-mcp-hook"
_MODERN = "2026-07-28"
_CURSOR_EVENTS = frozenset({"sessionStart"})
_DEFAULT_EVENT = {"session-start": "SessionStart", "prompt": "UserPromptSubmit"}
_DIGEST_ID = re.compile(r"\(id ([0-9a-f]{8})\)")


def main(invocation: Invocation) -> int:
    """The `hook` subcommand: always exit 0 (a hook must never fail the host's prompt)."""
    return _main(invocation.args[0] if invocation.args else "", invocation.store_dir, invocation.project_dir)


def _main(event: str, store_dir: str | None, project_dir: str | None) -> int:
    with contextlib.suppress(BaseException):  # even Ctrl+C or a broken pipe ends quietly
        run_hook(event, sys.stdin.buffer, sys.stdout, store_dir=store_dir, project_dir=project_dir)
    return 0


def _cli(argv: Sequence[str]) -> int:
    """``python -m dsh_memory_mcp.cli.hook [--store-dir DIR] [--project DIR] EVENT``: the entry
    `setup` writes (no parser, no subcommand table: a host pays for it on every prompt)."""
    words = list(argv)
    found: dict[str, str] = {}
    while len(words) >= 2 and words[0] in ("--store-dir", "--project"):
        found[words[0]] = words[1]
        del words[:2]
    return _main(words[0] if len(words) == 1 else "", found.get("--store-dir"), found.get("--project"))


def _log(event: str, ids: list[str], project: str, chars: int) -> None:
    """The person can see what reached the model: one line in the log file, ids only, never text."""
    import logging

    from dsh_memory_mcp.cli import logs

    logs.log.setLevel(logging.DEBUG if config.read("DSH_MEMORY_DEBUG") else logging.INFO)
    logs.log.propagate = False  # the log file only: stderr is the host's to show
    logs.configure_file_logging()
    try:
        logging.getLogger("dsh_memory_mcp.cli.hook").info(
            "hook %s: 注入 %d 条记忆 %s(项目 %s,%d 字)", event, len(ids), " ".join(ids) or "-", project, chars
        )
    finally:
        logs.remove_handlers()


def run_hook(
    event: str,
    stdin: BinaryIO,
    stdout: TextIO,
    *,
    store_dir: str | None = None,
    project_dir: str | None = None,
) -> str:
    """Read the host's JSON, print what it adds to the context; returns that text ("" for nothing)."""
    if event not in EVENTS:
        return ""
    raw = stdin.read(MAX_INPUT + 1)
    if len(raw) > MAX_INPUT:
        return ""
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        return ""
    env = config.environ()
    settings = config.resolve_settings(store_dir=store_dir, project_dir=project_dir, env=env, cwd=_workspace(data))
    budget = settings.hook_budget
    session = _session_file(data)
    seen = _load_seen(session)
    if event == "session-start":
        text = _digest(settings) if config.read("DSH_MEMORY_DIGEST", env) else ""
        if len(text) > budget:  # whole lines only
            text = text[: text.rfind("\n", 0, budget + 1)] if "\n" in text[: budget + 1] else ""
        ids = _DIGEST_ID.findall(text)
    else:
        prompt = data.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip() or not budget:
            return ""
        text, ids = _pack(_search(settings, prompt), seen, budget)
    if not text:
        return ""
    name = data.get("hook_event_name")
    name = name if isinstance(name, str) and name else _DEFAULT_EVENT[event]
    if name in _CURSOR_EVENTS:
        answer: dict[str, Any] = {"additional_context": text}
    else:
        answer = {"hookSpecificOutput": {"hookEventName": name, "additionalContext": text}}
    stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
    stdout.flush()
    _save_seen(session, seen | set(ids))
    with contextlib.suppress(Exception):
        _log(event, ids, settings.project_dir, len(text))
    return text


# ----------------------------------------------------------------------------------------------
# The host's input


def _workspace(data: Mapping[str, Any]) -> str:
    """The hook's working directory: `cwd` (Claude Code, Gemini CLI), Cursor's first workspace root."""
    cwd = data.get("cwd")
    if isinstance(cwd, str) and os.path.isabs(cwd):
        return cwd
    roots = data.get("workspace_roots")
    if isinstance(roots, list) and roots and isinstance(roots[0], str) and os.path.isabs(roots[0]):
        return roots[0]
    return os.getcwd()


# ----------------------------------------------------------------------------------------------
# What this session already got


def _state_dir() -> str:
    return os.path.join(config.user_state_dir(), "hooks")


def _session_file(data: Mapping[str, Any]) -> str | None:
    session = data.get("session_id") or data.get("conversation_id")
    if not isinstance(session, str) or not session:
        return None
    key = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return os.path.join(_state_dir(), f"{key}.json")


def _load_seen(path: str | None) -> set[str]:
    if path is None:
        return set()
    try:
        with open(path, encoding="utf-8") as fh:
            ids = json.load(fh).get("ids")
    except (OSError, ValueError, AttributeError):
        return set()
    return {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()


def _save_seen(path: str | None, ids: set[str]) -> None:
    if path is None:
        return
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fresh = not os.path.exists(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump({"ids": sorted(ids)}, fh)
    os.replace(tmp, path)
    if fresh:  # a new session: drop the files of sessions idle for a week
        cutoff = time.time() - STATE_DAYS * 86_400
        for name in os.listdir(directory):
            with contextlib.suppress(OSError):
                full = os.path.join(directory, name)
                if os.lstat(full).st_mtime < cutoff:
                    os.unlink(full)


# ----------------------------------------------------------------------------------------------
# What to add


def _pack(records: list[dict[str, Any]], seen: set[str], budget: int) -> tuple[str, list[str]]:
    """The records not injected yet, best first, as lines within `budget` characters."""
    header = "与本次提问相关的长期记忆(dsh-memory;完整内容用 memory_get 传 id):"  # for the model: Chinese
    lines = [header]
    used = len(header)
    ids: list[str] = []
    for record in records:
        short = str(record.get("shortId") or str(record.get("id", ""))[:8])
        if not short or short in seen or short in ids:
            continue
        scope = "global" if record.get("scope") == "global" else "项目"
        head = f"- [{scope}·{record.get('kind', 'note')}] "
        tail = f" (id {short})"
        content = " ".join(str(record.get("content", "")).split())
        room = budget - used - 1 - len(head) - len(tail)
        if room < min(len(content), 40):
            if ids:
                break
            continue
        if len(content) > room:
            content = content[: room - 1] + "…"
        line = head + content + tail
        lines.append(line)
        used += 1 + len(line)
        ids.append(short)
    return ("\n".join(lines), ids) if ids else ("", [])


def _search(settings: config.Settings, prompt: str) -> list[dict[str, Any]]:
    arguments = {"query": prompt[:2000], "topK": TOP_K}
    found = _from_serve(settings, "tools/call", {"name": "memory_search", "arguments": arguments})
    if found is not None:
        structured = found.get("structuredContent") if isinstance(found, dict) else None
        records = structured.get("records") if isinstance(structured, dict) else None
        return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []
    with _direct(settings) as (service, ctx):
        records = (service.call("memory_search", arguments, ctx).structured or {}).get("records")
    return list(records) if isinstance(records, list) else []


def _digest(settings: config.Settings) -> str:
    found = _from_serve(settings, "server/discover", {})
    if found is not None:
        instructions = found.get("instructions") if isinstance(found, dict) else None
        # The instructions are the usage guidance (one paragraph), then the digest.
        return instructions.partition("\n\n")[2] if isinstance(instructions, str) else ""
    from dsh_memory_mcp.service import digest

    with _direct(settings) as (service, ctx):
        cache = digest.DigestCache(digest.default_cache_dir(), settings.store_dir)
        return cache.get(service.store, ctx.project, service.clock())


@contextlib.contextmanager
def _direct(settings: config.Settings) -> Iterator[tuple[Any, Any]]:
    """The store opened read-only and lexical only (a hook must not start an embedding server)."""
    import dataclasses

    from dsh_memory_mcp.service.compose import close_service, open_service
    from dsh_memory_mcp.service.context import default_context

    if not os.path.isdir(settings.store_dir):
        raise FileNotFoundError(settings.store_dir)
    quiet = dataclasses.replace(settings, vector=config.VectorSettings(enabled=False))
    service = open_service(quiet, prepare=False, read_only=True)
    try:
        yield service, dataclasses.replace(default_context(quiet), client=CLIENT, record_access=False)
    finally:
        close_service(service)


# ----------------------------------------------------------------------------------------------
# serve over HTTP


def _from_serve(settings: config.Settings, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """`serve`'s result for one 2026-07-28 request, or None when no trusted live serve answers."""
    from dsh_memory_mcp.transports import relay_wire, serve_file
    from dsh_memory_mcp.transports.call_facts import PROJECT_HEADER, PROJECT_SOURCE_HEADER, encode_project

    info, _why = serve_file.read(settings.store_dir)
    if info is None or not info.alive:
        return None
    url = urllib.parse.urlsplit(info.url)
    if url.scheme != "http" or not url.hostname:
        return None
    meta = {
        relay_wire.PROTOCOL_VERSION_META_KEY: _MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": CLIENT, "version": __version__},
    }
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Authorization": f"Bearer {info.token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **relay_wire.routing_headers(relay_wire.Message("request", request), _MODERN),
        PROJECT_HEADER: encode_project(settings.project_dir),
        PROJECT_SOURCE_HEADER: settings.project_source,
    }
    status, content_type, payload = _post(url, headers, json.dumps(request).encode("utf-8"))
    if status != 200:
        return None
    if content_type.startswith("text/event-stream"):
        payload = next(relay_wire.read_sse(io.BytesIO(payload)), b"null")
    message = json.loads(payload)
    result = message.get("result") if isinstance(message, dict) else None
    return result if isinstance(result, dict) else None


def _post(url: urllib.parse.SplitResult, headers: dict[str, str], body: bytes) -> tuple[int, str, bytes]:
    """One HTTP/1.1 POST on a plain socket (`http.client` would cost a hook ~30 ms of imports).

    Returns (status, content type, body); (0, "", b"") when serve refuses the connection or it
    breaks. A stall past `SERVE_TIMEOUT` raises TimeoutError: the hook's time is gone.
    """
    lines = [f"POST {url.path or '/mcp'} HTTP/1.1", f"Host: {url.netloc}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    deadline = time.monotonic() + SERVE_TIMEOUT
    chunks: list[bytes] = []
    try:
        with socket.create_connection((url.hostname or "", url.port or 80), timeout=SERVE_TIMEOUT) as sock:
            sock.sendall(request)
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if sum(map(len, chunks)) > 8 * 1024 * 1024:
                    return 0, "", b""
    except TimeoutError:
        raise
    except OSError:
        return 0, "", b""  # refused or gone: the store itself may still be read
    head, _, rest = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *fields = head.decode("latin-1").split("\r\n")
    parts = status_line.split(" ", 2)
    if len(parts) < 2 or not parts[1].isdigit():
        return 0, "", b""
    found = {k.strip().lower(): v.strip() for k, _, v in (f.partition(":") for f in fields)}
    if found.get("transfer-encoding", "").lower() == "chunked":
        rest = _unchunk(rest)
    return int(parts[1]), found.get("content-type", ""), rest


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += data[:size]
        data = data[size + 2 :]
    return bytes(out)


if __name__ == "__main__":
    sys.exit(_cli(sys.argv[1:]))
