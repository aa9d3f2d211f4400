"""Crash-safe file replacement, shared by the scope files, the sidecars and the lock markers.

A file other processes read is only ever replaced whole: a uniquely named tmp in the same
directory (a fixed name would let two writers clobber each other's tmp), fsync, `os.replace`,
then fsync the directory so the rename itself survives a crash. Readers see the old file or the
new one, never a half-written one. Standard library only; callers translate `OSError` into their
own errors.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
import time
from collections.abc import Iterable

__all__ = ["commit", "fsync_dir", "new_tmp", "replace", "write_all"]


def write_all(fd: int, data: bytes | Iterable[bytes]) -> None:
    """Write every byte (`os.write` may write less than asked), from one buffer or many."""
    for chunk in (data,) if isinstance(data, bytes) else data:
        view = memoryview(chunk)
        while view:
            written = os.write(fd, view)
            view = view[written:]


def fsync_dir(directory: str) -> None:
    """Make a rename durable (POSIX); best effort, some filesystems refuse."""
    if sys.platform == "win32":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace(src: str, dst: str) -> None:
    """`os.replace`, retried briefly on Windows, where a reader holding `dst` open blocks it."""
    for attempt in range(40):
        try:
            os.replace(src, dst)
            return
        except PermissionError:
            if sys.platform != "win32" or attempt == 39:
                raise
            time.sleep(0.025)


def new_tmp(path: str) -> tuple[int, str]:
    """A new, uniquely named 0o600 tmp file next to `path` (its directory created 0o700)."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    return tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")


def commit(fd: int, tmp: str, path: str, data: bytes | Iterable[bytes], *, keep_mode: bool = False) -> os.stat_result:
    """Write `data` to the tmp from `new_tmp`, fsync it and put it in place of `path`.

    Returns the stat of the written file, taken from the tmp's descriptor *before* the rename:
    a stat after the rename could already include another writer's change. `keep_mode` gives
    the new file the mode of the one it replaces (else `mkstemp`'s 0o600). On any failure the
    tmp is removed and `path` is untouched; the descriptor is always closed.
    """
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if keep_mode:
            with contextlib.suppress(OSError):
                os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(os.path.dirname(path) or ".")
    return st
