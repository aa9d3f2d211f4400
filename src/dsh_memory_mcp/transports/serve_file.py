"""`<store>/serve.json` (``{url, pid, token, version, startedAt}``, 0600): how a running `serve` is
found, and why there is only one per store (docs/design.md: Shared server, relay and their trust
rules). Standard library only. It holds the bearer token, so it is trusted only when it is the current
user's and nobody else may write it (`read`): a planted file could send a host's session elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.layout import SERVE_FILE, StoreLayout
from dsh_memory_mcp.texts import msg

SERVE_FILE_NAME = SERVE_FILE
_MAX_BYTES = 64 * 1024


def path_for(store_dir: str) -> str:
    """``<store>/serve.json`` (`StoreLayout.serve_path`)."""
    return StoreLayout.at(store_dir).serve_path


@dataclass(frozen=True)
class ServeInfo:
    """What one `serve.json` says."""

    url: str
    pid: int
    token: str
    version: str
    started_at: int

    def to_json(self) -> bytes:
        data = {"url": self.url, "pid": self.pid, "token": self.token, "version": self.version}
        data["startedAt"] = self.started_at
        return (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8")

    @property
    def alive(self) -> bool:
        """Whether its process still exists on this machine."""
        return fileio.pid_alive(self.pid)


def _parse(content: bytes | None) -> ServeInfo | None:
    try:
        data = json.loads(content.decode("utf-8")) if content is not None else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    url, pid, token = data.get("url"), data.get("pid"), data.get("token")
    version, started = data.get("version", ""), data.get("startedAt", 0)
    if not (isinstance(url, str) and isinstance(token, str) and isinstance(pid, int) and not isinstance(pid, bool)):
        return None
    if pid <= 0 or not url.startswith(("http://", "https://")) or not token:
        return None
    return ServeInfo(
        url=url,
        pid=pid,
        token=token,
        version=version if isinstance(version, str) else "",
        started_at=started if isinstance(started, int) and not isinstance(started, bool) else 0,
    )


def untrusted_reason(st: os.stat_result) -> str | None:
    """Why a `serve.json` with this stat must not be believed; None when it may be."""
    if not stat.S_ISREG(st.st_mode):
        return msg("不是普通文件")
    if sys.platform != "win32":
        getuid = getattr(os, "getuid", None)
        if getuid is not None and st.st_uid != getuid():
            return msg("属于另一个用户(uid {uid})", uid=st.st_uid)
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return msg("同组或其他用户可写(权限 {mode})", mode=f"{stat.S_IMODE(st.st_mode):o}")
    return None


def read(store_dir: str) -> tuple[ServeInfo | None, str]:
    """`(info, why)`: the trusted, parsed `serve.json` (never through a symlink; liveness unchecked),
    or None and the reason there is none."""
    path = path_for(store_dir)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, msg("没有 {name}", name=SERVE_FILE_NAME)
    except OSError as exc:
        return None, msg("读不了 {path}({why})", path=path, why=exc.strerror or exc)
    try:
        st = os.fstat(fd)
        reason = untrusted_reason(st)
        if reason is not None:
            return None, msg("{path} 不可信:{reason}", path=path, reason=reason)
        content = os.read(fd, _MAX_BYTES + 1)
    except OSError as exc:
        return None, msg("读不了 {path}({why})", path=path, why=exc.strerror or exc)
    finally:
        os.close(fd)
    if len(content) > _MAX_BYTES:
        return None, msg("{path} 太大,不是 serve 写的", path=path)
    info = _parse(content)
    if info is None:
        return None, msg("{path} 内容无法解析", path=path)
    return info, ""


@dataclass(frozen=True)
class Claim:
    """The outcome of `claim`: `ok`, or the live `serve` (`other`) that already owns the store."""

    ok: bool
    other: ServeInfo | None = None
    replaced_stale: ServeInfo | None = None
    #: Why the replaced file was stale (Chinese, for the start-up line).
    replaced_why: str = ""


#: A `serve.json` younger than this whose pid lives owns the store even before its `/health` answers.
CLAIM_GRACE_SECS = 10.0
#: How long each of the two `/health` checks of another `serve` may take.
OWNER_PROBE_TIMEOUT = 2.0


def _stale_why(info: ServeInfo, path: str) -> str | None:
    """Why the `serve.json` at `path` (saying `info`) no longer owns the store, or None when it does:
    its pid must live and, once the file is older than `CLAIM_GRACE_SECS`, its `/health` must answer
    with its token as that pid (a reused pid or a wedged `serve` does not keep the store)."""
    if not info.alive:
        return msg("已不在运行")
    if not _old_enough(path, CLAIM_GRACE_SECS):
        return None
    for _ in range(2):
        if health(info, timeout=OWNER_PROBE_TIMEOUT) is not None:
            return None
    return msg("的进程还在,但它的 /health 不用文件里的令牌应答(不是这个记忆库的 serve)")


def owner(store_dir: str) -> ServeInfo | None:
    """The other live `serve` that owns this store (by its trusted `serve.json`), or None."""
    info, _ = read(store_dir)
    if info is None or info.pid == os.getpid():
        return None
    return info if _stale_why(info, path_for(store_dir)) is None else None


def claim(store_dir: str, info: ServeInfo) -> Claim:
    """Write `serve.json` for `info` unless a live `serve` owns the store; a stale file (`_stale_why`,
    or unparsable and a few seconds old) is replaced. The file appears whole or not at all: a 0600
    tmp is `os.link`ed into place only if no file is there (of two `serve`s, exactly one succeeds).

    :raises OSError: the store directory is not writable.
    """
    path = path_for(store_dir)
    os.makedirs(store_dir, mode=0o700, exist_ok=True)
    replaced: ServeInfo | None = None
    replaced_why = ""
    for _ in range(5):
        fd, tmp = fileio.new_tmp(path)
        try:
            try:
                fileio.write_all(fd, info.to_json())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
            except OSError:
                # No hard links here (some network/FAT filesystems): O_EXCL create, then write.
                if _create_exclusive(path, info.to_json()):
                    return Claim(ok=True, replaced_stale=replaced, replaced_why=replaced_why)
            else:
                fileio.fsync_dir(store_dir)
                return Claim(ok=True, replaced_stale=replaced, replaced_why=replaced_why)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raw = _raw(path)
        existing = _parse(raw)
        if existing is None:
            why: str | None = ""
        elif existing.pid == os.getpid():
            why = msg("是本进程留下的")
        else:
            why = _stale_why(existing, path)
        if existing is not None and why is None:
            return Claim(ok=False, other=existing)
        if existing is None and not _old_enough(path):
            time.sleep(0.2)  # another serve between create and write: look again
            continue
        if existing is not None:
            replaced, replaced_why = existing, why or ""
        if _raw(path) == raw:  # judging took a while: remove only the file that was judged
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return Claim(ok=False, other=_parse(_raw(path)))


def _create_exclusive(path: str, content: bytes) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_BINARY", 0), 0o600)
    except FileExistsError:
        return False
    try:
        fileio.write_all(fd, content)
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _raw(path: str) -> bytes | None:
    """The bytes at `path` when it is a regular file (never blocks on a FIFO, never follows a link)."""
    try:
        fd = fileio.open_regular(path, follow=False)
    except OSError:
        return None
    try:
        return os.read(fd, _MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def _old_enough(path: str, seconds: float = 2.0) -> bool:
    try:
        return time.time() - os.stat(path).st_mtime > seconds
    except OSError:
        return True


def release(store_dir: str, info: ServeInfo) -> None:
    """Remove `serve.json` if it is still ours (same pid and token); another serve's file stays."""
    path = path_for(store_dir)
    existing = _parse(_raw(path))
    if existing is not None and existing.pid == info.pid and existing.token == info.token:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def get_health(url: str, headers: Mapping[str, str], timeout: float) -> tuple[int | None, Any, str]:
    """``GET`` the ``/health`` next to a serve's ``…/mcp`` `url` with `headers`, no proxy (serve URLs
    are usually loopback): `(status, body as JSON or None, why)`; status None and `why` when nothing
    answered.
    A live serve answers 200 and ``{"ok": true, "name": "dsh-memory-mcp", …}`` (`is_serve`).

    :raises ValueError: `url` cannot be requested at all (not an http(s) URL).
    """
    import urllib.error  # lazily: ~20 ms the relay's cold start only pays when it probes
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    health_url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/health", "", ""))
    request = urllib.request.Request(health_url, headers=dict(headers))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read(_MAX_BYTES)
            status = response.status
    except urllib.error.HTTPError as exc:
        return exc.code, None, f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return None, None, str(getattr(exc, "reason", exc))
    try:
        return status, json.loads(body.decode("utf-8")), ""
    except ValueError:
        return status, None, ""


def is_serve(data: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a ``/health`` body is a live dsh-memory-mcp serve's."""
    return isinstance(data, dict) and data.get("name") == "dsh-memory-mcp" and data.get("ok") is True


def health(info: ServeInfo, timeout: float = 1.0) -> dict[str, Any] | None:
    """What `GET /health` with the file's token answers, when it is a live `serve`'s answer — and,
    when it names a pid, `info`'s pid — else None."""
    status, data, _ = get_health(info.url, {"Authorization": f"Bearer {info.token}"}, timeout)
    if status != 200 or not is_serve(data):
        return None
    pid = data.get("pid")
    if isinstance(pid, int) and not isinstance(pid, bool) and pid != info.pid:
        return None
    return data
