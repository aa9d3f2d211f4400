"""`<store>/serve.json`: how a running `serve` is found, and why there is only one per store.

`serve` writes the file once it listens, removes it at exit, and refuses to start while another
live `serve` owns it. A stdio start (the relay) reads it to decide whether to relay. Standard
library only: the relay must come up without the SDK.

File (JSON object, 0600)::

    {"url": "http://127.0.0.1:7766/mcp", "pid": 1234, "token": "…", "version": "0.1.0",
     "startedAt": 1764581234567}

``startedAt`` is epoch milliseconds, like the store's other timestamps. The token in it is the
bearer token `/mcp` needs, which is why the file is only *trusted* when it belongs to the current
user and nobody else may write it (`read`): a planted file could send a host's session (and its
`Authorization`) to someone else's server.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
import urllib.parse
from dataclasses import dataclass

from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.layout import SERVE_FILE, StoreLayout

__all__ = [
    "SERVE_FILE_NAME",
    "Claim",
    "ServeInfo",
    "claim",
    "health_url",
    "path_for",
    "probe",
    "read",
    "release",
    "untrusted_reason",
]

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


def _parse(content: bytes) -> ServeInfo | None:
    try:
        data = json.loads(content.decode("utf-8"))
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
        return "不是普通文件"
    if sys.platform != "win32":
        getuid = getattr(os, "getuid", None)
        if getuid is not None and st.st_uid != getuid():
            return f"属于另一个用户(uid {st.st_uid})"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"同组或其他用户可写(权限 {stat.S_IMODE(st.st_mode):o})"
    return None


def read(store_dir: str) -> tuple[ServeInfo | None, str]:
    """`(info, why)`: the trusted, parsed `serve.json`, or None and the reason (Chinese) there is none.

    A symlink is not followed (`O_NOFOLLOW`): the file must be the store's own. Liveness is not
    checked here; see `ServeInfo.alive`.
    """
    path = path_for(store_dir)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, f"没有 {SERVE_FILE_NAME}"
    except OSError as exc:
        return None, f"读不了 {path}({exc.strerror or exc})"
    try:
        st = os.fstat(fd)
        reason = untrusted_reason(st)
        if reason is not None:
            return None, f"{path} 不可信:{reason}"
        content = os.read(fd, _MAX_BYTES + 1)
    except OSError as exc:
        return None, f"读不了 {path}({exc.strerror or exc})"
    finally:
        os.close(fd)
    if len(content) > _MAX_BYTES:
        return None, f"{path} 太大,不是 serve 写的"
    info = _parse(content)
    if info is None:
        return None, f"{path} 内容无法解析"
    return info, ""


@dataclass(frozen=True)
class Claim:
    """The outcome of `claim`: `ok`, or the live `serve` (`other`) that already owns the store."""

    ok: bool
    other: ServeInfo | None = None
    replaced_stale: ServeInfo | None = None


def claim(store_dir: str, info: ServeInfo) -> Claim:
    """Write `serve.json` for `info` unless a live `serve` owns the store; a stale file is replaced.

    The file appears whole or not at all: its content goes into a 0600 tmp first, then
    `os.link` puts it in place only if no file is there (two `serve`s starting at once: exactly
    one link succeeds). A file whose pid is dead, or that cannot be parsed and is older than a
    few seconds (a crash between create and write on a filesystem without links), is stale.

    :raises OSError: the store directory is not writable.
    """
    path = path_for(store_dir)
    os.makedirs(store_dir, mode=0o700, exist_ok=True)
    replaced: ServeInfo | None = None
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
                    return Claim(ok=True, replaced_stale=replaced)
            else:
                fileio.fsync_dir(store_dir)
                return Claim(ok=True, replaced_stale=replaced)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        existing = _existing(path)
        if existing is not None and existing.alive and existing.pid != os.getpid():
            return Claim(ok=False, other=existing)
        if existing is None and not _old_enough(path):
            time.sleep(0.2)  # another serve between create and write: look again
            continue
        replaced = existing or replaced
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    existing = _existing(path)
    return Claim(ok=False, other=existing)


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


def _existing(path: str) -> ServeInfo | None:
    try:
        with open(path, "rb") as handle:
            return _parse(handle.read(_MAX_BYTES + 1))
    except OSError:
        return None


def _old_enough(path: str, seconds: float = 2.0) -> bool:
    try:
        return time.time() - os.stat(path).st_mtime > seconds
    except OSError:
        return True


def release(store_dir: str, info: ServeInfo) -> None:
    """Remove `serve.json` if it is still ours (same pid and token); another serve's file stays."""
    path = path_for(store_dir)
    existing = _existing(path)
    if existing is not None and existing.pid == info.pid and existing.token == info.token:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def health_url(info: ServeInfo) -> str:
    """``GET`` this with the bearer token: 200 and ``{"ok": true, "name": "dsh-memory-mcp", …}`` from a live serve."""
    parts = urllib.parse.urlsplit(info.url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/health", "", ""))


def probe(info: ServeInfo, timeout: float = 1.0) -> bool:
    """Whether `info` names a live `serve` that accepts its token (``GET /health``, no proxy)."""
    import urllib.request  # lazily: ~20 ms the relay's cold start only pays when it probes

    request = urllib.request.Request(health_url(info), headers={"Authorization": f"Bearer {info.token}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            if response.status != 200:
                return False
            data = json.loads(response.read(_MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("name") == "dsh-memory-mcp" and data.get("ok") is True
