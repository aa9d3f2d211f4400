"""The token `serve` keeps across restarts, one per store: ``<user state dir>/serve-tokens/<sha1(store)>.json``
(0600, directory 0700), so URL host configs written by ``setup --url`` keep working. ``serve --new-token``
replaces it; ``DSH_MEMORY_TOKEN``, when set, wins and the file is neither read nor written.

A file that is not ours, not a regular file, or that others may read or write is not used (its token
may be known to someone else): a fresh token replaces it and serve says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
import sys
import time
from dataclasses import dataclass

from dsh_memory_mcp import config
from dsh_memory_mcp.cli.hosts import normal_path
from dsh_memory_mcp.cli.messages import t
from dsh_memory_mcp.store import fileio

_MAX_BYTES = 4096


def path_for(store_dir: str) -> str:
    """Where the kept token of `store_dir` lives (computing it creates nothing)."""
    key = hashlib.sha1(normal_path(store_dir).encode("utf-8", "surrogateescape")).hexdigest()
    return os.path.join(config.user_state_dir(), "serve-tokens", key + ".json")


@dataclass(frozen=True)
class KeptToken:
    token: str
    path: str
    #: Why an existing file was not used ("" when it was fine or there was none).
    replaced_because: str = ""
    created: bool = False


def _untrusted(st: os.stat_result) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return t("不是普通文件")
    if sys.platform != "win32":
        if st.st_uid != os.geteuid():
            return t("属于另一个用户(uid {uid})", uid=st.st_uid)
        if st.st_mode & 0o077:
            return t("同组或其他用户可读写(权限 {mode})", mode=f"{stat.S_IMODE(st.st_mode):o}")
    return None


def read(store_dir: str) -> tuple[str | None, str]:
    """`(token, why)`: the kept token of `store_dir`, or None and why not (Chinese; "" = no file)."""
    path = path_for(store_dir)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, t("读不了 {path}({why})", path=path, why=exc.strerror or exc)
    try:
        problem = _untrusted(os.fstat(fd))
        if problem is not None:
            return None, t("{path} 不可信:{problem}", path=path, problem=problem)
        data = os.read(fd, _MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        token = json.loads(data.decode("utf-8")).get("token") if len(data) <= _MAX_BYTES else None
    except (UnicodeDecodeError, ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or len(token) < 32 or not token.isascii() or not token.isprintable():
        return None, t("{path} 内容无法解析", path=path)
    return token, ""


def _write(store_dir: str, token: str) -> str:
    path = path_for(store_dir)
    fileio.private_dirs(os.path.dirname(path))
    with contextlib.suppress(OSError):
        os.chmod(os.path.dirname(path), 0o700)
    record = {"store": os.path.abspath(store_dir), "token": token, "createdAt": time.time_ns() // 1_000_000}
    fd, tmp = fileio.new_tmp(path)  # 0600
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(os.lstat(path).st_mode):  # a link or FIFO planted there: ours replaces it
            os.unlink(path)
    fileio.commit(fd, tmp, path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
    return path


def keep(store_dir: str, *, rotate: bool = False) -> KeptToken:
    """The kept token of `store_dir`, made (and written) on first use, when the file is unusable, or
    with `rotate` (``serve --new-token``) in place of the old one.

    :raises OSError: the state dir cannot be written (serve then cannot promise a lasting token).
    """
    token, why = (None, "") if rotate else read(store_dir)
    if token is not None:
        return KeptToken(token, path_for(store_dir))
    fresh = secrets.token_urlsafe(32)
    return KeptToken(fresh, _write(store_dir, fresh), replaced_because=why, created=True)
