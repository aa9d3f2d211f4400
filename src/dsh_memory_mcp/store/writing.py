"""Putting bytes of store files on disk, with the store's coded errors: `replace_file` (whole,
`fileio.commit`) and `append_bytes` (whole lines at the end, under the scope lock)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator, Sequence

from dsh_memory_mcp.errors import StoreError
from dsh_memory_mcp.store import fileio, records
from dsh_memory_mcp.store.records import Line
from dsh_memory_mcp.texts import msg

#: Lines per write when a scope file is rewritten.
_WRITE_CHUNK = 1000


def encoded_chunks(lines: Sequence[Line]) -> Iterator[bytes]:
    """The file's bytes in pieces of `_WRITE_CHUNK` lines (bounding peak memory)."""
    for start in range(0, len(lines), _WRITE_CHUNK):
        chunk = lines[start : start + _WRITE_CHUNK]
        yield records.render_bytes(chunk)


def replace_file(path: str, data: bytes | Iterable[bytes], *, read: fileio.Read | None = None) -> os.stat_result:
    """Replace `path` (a symlink: its target, `fileio.write_target`) by `data` with `fileio.commit`
    (0o600; `read`: what `data` was made from); the stat of the tmp before the rename.

    :raises fileio.Changed: the file is no longer what `read` describes (nothing written).
    :raises StoreError: from any other `OSError`, with the path and the reason in Chinese.
    """
    try:
        path = fileio.write_target(path)
    except OSError as exc:
        raise StoreError(
            msg("写入 {path} 失败:{why}。原文件未改动。", path=path, why=exc.strerror or exc), path=path
        ) from exc
    try:
        fd, tmp = fileio.new_tmp(path)
    except OSError as exc:
        raise _cannot_open(path, exc) from exc
    try:
        return fileio.commit(fd, tmp, path, data, read=read)
    except fileio.Changed:
        raise
    except OSError as exc:
        raise _cannot_write(path, exc) from exc


def unreadable(path: str, exc: OSError) -> StoreError:
    """The error for a scope file that exists but cannot be read."""
    return StoreError(msg("无法读取记忆文件 {path}:{why}。", path=path, why=exc.strerror or exc), path=path)


def _cannot_open(path: str, exc: OSError) -> StoreError:
    why = exc.strerror or exc
    return StoreError(
        msg("写入 {path} 失败:{why}。原文件未改动;请检查记忆库目录是否存在且可写。", path=path, why=why), path=path
    )


def _cannot_write(path: str, exc: OSError) -> StoreError:
    why = exc.strerror or exc
    return StoreError(
        msg("写入 {path} 失败:{why}。原文件未改动;请检查磁盘空间、文件大小限制与权限。", path=path, why=why), path=path
    )


class Probe:
    """Wraps the chunks of a rewrite, keeping their first and last `keep` bytes and newline count."""

    def __init__(self, chunks: Iterable[bytes], keep: int) -> None:
        self._chunks = chunks
        self._keep = keep
        self.head = b""
        self.tail = b""
        self.newlines = 0

    def __iter__(self) -> Iterator[bytes]:
        keep = self._keep
        for chunk in self._chunks:
            if len(self.head) < keep:
                self.head = (self.head + chunk[:keep])[:keep]
            self.tail = (self.tail + chunk)[-keep:] if len(chunk) < keep else chunk[-keep:]
            self.newlines += chunk.count(b"\n")
            yield chunk


def sync_file(path: str) -> None:
    """fsync `path` (a scope file another writer appended to: a dedupe acknowledges its line).

    :raises StoreError: it exists but cannot be flushed.
    """
    try:
        fd = fileio.open_regular(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise unreadable(path, exc) from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        raise StoreError(
            msg("记忆文件 {path} 无法落盘:{why}。请检查磁盘。", path=path, why=exc.strerror or exc), path=path
        ) from exc
    finally:
        os.close(fd)


def append_bytes(
    path: str, data: bytes, *, expect: tuple[int, int, int, int] | None, defer: fileio.Durability
) -> tuple[os.stat_result, bool, bool]:
    """Append `data` (whole lines) to `path` in one write; the caller holds the scope lock. The
    descriptor is handed to `defer`, which fsyncs it after the lock.

    `expect`: the identity the caller's snapshot has (None: no file). Returns ``(stat after,
    matched, torn)``: `matched` False when the file was not `expect` (nothing written) or was
    replaced while we wrote; `torn` when it lacked its final newline, written first so the
    unfinished line stays its own. A failed write is cut back to the old length.

    :raises StoreError: the file cannot be opened or written.
    """
    try:
        created = not os.path.exists(path)
        if created:
            os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        # O_NONBLOCK: a FIFO in place of the scope file must not block the open (refused below).
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise _cannot_open(path, exc) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StoreError(msg("写入 {path} 失败:它不是普通文件。原文件未改动。", path=path), path=path)
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if identity != expect and not (expect is None and st.st_size == 0):
            os.close(fd)
            return st, False, False
        size = st.st_size
        torn = size > 0 and fileio.read_from(fd, size - 1)[:1] != b"\n"
        payload = b"\n" + data if torn else data
        # The lock's ownership check (`LockManager.verify`), right before the bytes go out.
        fileio.check_guards()
        try:
            fileio.write_all(fd, payload)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
                os.fsync(fd)
            raise _cannot_write(path, exc) from exc
        after = os.fstat(fd)
    except BaseException:
        os.close(fd)
        raise
    defer.add(fd)
    if created:
        fileio.fsync_dir(os.path.dirname(path) or ".")
    try:
        now = os.stat(path)
    except OSError:
        now = None
    if now is None or (now.st_dev, now.st_ino) != (after.st_dev, after.st_ino):
        # An unlocked writer renamed another file over this one while we wrote: our line is in
        # the replaced inode, which nobody will read. Not acknowledged: the caller starts over.
        return after, False, torn
    return after, True, torn
