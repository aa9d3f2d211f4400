"""Putting bytes of store files on disk, with the store's coded errors.

`replace_file` replaces a file whole (`fileio.commit`: unique tmp → fsync → rename → fsync dir);
`encoded_chunks` renders scope lines for it in pieces.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence

from dsh_memory_mcp.errors import StoreError
from dsh_memory_mcp.store import fileio, records
from dsh_memory_mcp.store.records import Line

__all__ = ["encoded_chunks", "replace_file"]

#: Lines per write when a scope file is rewritten.
_WRITE_CHUNK = 1000


def encoded_chunks(lines: Sequence[Line]) -> Iterator[bytes]:
    """The file's bytes in pieces: rendering a 50k-record file into one string and one bytes
    object at once cost ~60 MB of peak memory that glibc then kept."""
    for start in range(0, len(lines), _WRITE_CHUNK):
        chunk = lines[start : start + _WRITE_CHUNK]
        yield records.render_lines(chunk).encode("utf-8", "surrogateescape")


def replace_file(path: str, data: bytes | Iterable[bytes]) -> os.stat_result:
    """Replace `path` by `data`: unique tmp in the same directory, fsync, rename, fsync the dir.

    Returns the stat of the written file, taken from the tmp's descriptor *before* the rename:
    a stat after the rename could already include another writer's append, and caching our
    lines under that identity would hide the append. The tmp is 0o600 (`mkstemp`), so is the
    result. On any failure the tmp is removed and the old file is untouched.

    :raises StoreError: from the `OSError`, with the path and the reason in Chinese.
    """
    try:
        fd, tmp = fileio.new_tmp(path)
    except OSError as exc:
        raise StoreError(
            f"写入 {path} 失败:{exc.strerror or exc}。原文件未改动;请检查记忆库目录是否存在且可写。", path=path
        ) from exc
    try:
        return fileio.commit(fd, tmp, path, data)
    except OSError as exc:
        raise StoreError(
            f"写入 {path} 失败:{exc.strerror or exc}。原文件未改动;请检查磁盘空间、文件大小限制与权限。", path=path
        ) from exc
