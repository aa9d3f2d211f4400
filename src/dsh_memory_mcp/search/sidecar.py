"""The `.vec` sidecar: one scope's vectors next to its JSONL, shared with DSH (docs/design.md: Store format).

An append is one ``os.write`` of whole lines on an ``O_APPEND`` descriptor, without a lock;
readers consume only up to the last newline. A removal or replacement rewrites the file under the
scope lock; an append racing it may be lost (re-embedded by the backfill, never a wrong vector).
A FIFO, device or directory in place of a sidecar is `fileio.NotRegularFile`: `read` and
`read_header` treat it as unusable (logged once per path), the writers raise it.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dsh_memory_mcp.store import fileio, redact

#: `(model_id, dims)`: what the first line declares.
Header = tuple[str, int]
Matrix = npt.NDArray[np.float32]

_HEADER_PROBE = 512

log = logging.getLogger("dsh_memory_mcp.search.sidecar")
_warned = redact.Once()


def warn_unusable(path: str, exc: OSError) -> None:
    """WARNING the first time a sidecar path turns out to be no regular file, DEBUG after."""
    (log.warning if _warned.first(path) else log.debug)(
        "vector: 向量文件 %s 不可用(%s),该范围只用词法检索", path, exc.strerror or exc
    )


def format_header(header: Header) -> str:
    model_id, dims = header
    return f"#{model_id}\t{dims}\n"


def parse_header(line: str) -> Header | None:
    """`#qwen3-embedding-0.6b\\t1024` → `("qwen3-embedding-0.6b", 1024)`; `None` if malformed."""
    line = line.rstrip("\r\n")
    if not line.startswith("#") or "\t" not in line:
        return None
    model_id, _, dims = line[1:].rpartition("\t")
    try:
        width = int(dims)
    except ValueError:
        return None
    if not model_id or width <= 0:
        return None
    return model_id, width


def l2_normalise(matrix: npt.ArrayLike) -> Matrix:
    """Rows scaled to unit length (float32); an all-zero row stays zero instead of becoming NaN."""
    m = np.array(matrix, dtype=np.float32, ndmin=2)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Matrix = (m / norms).astype(np.float32, copy=False)
    return out


def normalised_rows(entries: Sequence[tuple[str, list[float]]]) -> list[tuple[str, Matrix]]:
    """`(id, raw vector)` pairs as `(id, unit float32 row)` pairs, for `append` or `write`."""
    if not entries:
        return []
    normalised = l2_normalise([vec for _, vec in entries])
    return [(rid, normalised[i]) for i, (rid, _) in enumerate(entries)]


def entry_line(record_id: str, vector: npt.ArrayLike) -> str:
    """One body line: base64 of the raw little-endian float32 bytes (what DSH's `Float32Array` holds)."""
    encoded = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return f"{record_id}\t{encoded}\n"


def _open_for_reading(path: str) -> int | None:
    """A descriptor on the sidecar, or None when it is missing, unreadable or no regular file (warned)."""
    try:
        return fileio.open_regular(path)
    except fileio.NotRegularFile as exc:
        warn_unusable(path, exc)
    except OSError:
        pass
    return None


def read_header(path: str) -> Header | None:
    """The header of the sidecar at `path`; `None` when missing, empty or malformed."""
    fd = _open_for_reading(path)
    if fd is None:
        return None
    try:
        head = os.read(fd, _HEADER_PROBE)
    except OSError:
        return None
    finally:
        os.close(fd)
    return _header_of(head)


def _header_of(head: bytes) -> Header | None:
    end = head.find(b"\n")
    if end < 0:
        return None
    try:
        return parse_header(head[:end].decode("utf-8"))
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True)
class SidecarRead:
    """What one read of a sidecar found.

    `end` is the byte offset after the last complete line consumed: a later read from `end`
    picks up exactly what was appended since (a half-written last line is left for then).
    `identity` is ``(st_dev, st_ino)`` of the file read: a rewrite always makes a new inode.
    """

    header: Header | None
    ids: list[str]
    vectors: Matrix
    end: int
    identity: tuple[int, int]


def read(path: str, *, start: int = 0, header: Header | None = None) -> SidecarRead | None:
    """Parse the sidecar from byte `start` (0: from the header, else `header` is the one known);
    `None` if the file is missing or unusable. Lines that do not decode to exactly `dims` floats are
    skipped: the sidecar is derived data and the backfill re-embeds whatever is missing."""
    fd = _open_for_reading(path)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        data = fileio.read_from(fd, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    identity = (st.st_dev, st.st_ino)
    last_nl = data.rfind(b"\n")
    complete = data[: last_nl + 1] if last_nl >= 0 else b""
    end = start + len(complete)
    if start == 0:
        header = _header_of(complete)
        body_start = complete.find(b"\n") + 1 if header is not None else len(complete)
    else:
        body_start = 0
    if header is None:
        return SidecarRead(None, [], np.zeros((0, 0), dtype=np.float32), end, identity)
    ids, vectors = _parse_body(complete[body_start:], header)
    return SidecarRead(header, ids, vectors, end, identity)


def _parse_body(body: bytes, header: Header) -> tuple[list[str], Matrix]:
    dims = header[1]
    want = 4 * dims
    ids: list[str] = []
    chunks: list[bytes] = []
    for line in body.split(b"\n"):
        if not line or line.startswith(b"#"):
            continue  # blank, or a duplicate header from two creators racing: nothing to keep
        record_id, tab, encoded = line.rstrip(b"\r").partition(b"\t")
        if not tab or not record_id:
            continue
        try:
            raw = base64.b64decode(encoded, validate=True)
            rid = record_id.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if len(raw) != want:
            continue
        ids.append(rid)
        chunks.append(raw)
    if not chunks:
        return [], np.zeros((0, dims), dtype=np.float32)
    # One frombuffer over the joined bytes, not one array per line: the cold load of a big scope.
    vectors: Matrix = np.frombuffer(b"".join(chunks), dtype="<f4").reshape(len(chunks), dims).astype(np.float32)
    return ids, vectors


def append(path: str, header: Header, entries: Sequence[tuple[str, npt.ArrayLike]]) -> bool:
    """Append `entries` in one ``os.write`` if the file at `path` carries `header`.

    Returns False, writing nothing, when the file is missing or declares another header: the
    caller then creates or rebuilds it under the scope lock (`write`). The header is checked on
    the very descriptor that is written, so a concurrent replacement cannot slip in between.
    """
    if not entries:
        return True
    payload = "".join(entry_line(rid, vec) for rid, vec in entries).encode("utf-8")
    try:
        fd = fileio.open_regular(path, append=True)
    except FileNotFoundError:
        return False
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        if _header_of(os.read(fd, _HEADER_PROBE)) != header:
            return False
        # O_APPEND: the write goes to the end whatever the file offset is; a short write (never seen
        # for regular files) is finished rather than leaving half a line.
        fileio.write_all(fd, payload)
        return True
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Written:
    """What a rewrite produced: the new file's `(st_dev, st_ino)` and size, taken before the rename.

    Taken from the tmp's descriptor, not by a stat after the rename: by then another writer may
    have appended, and a cache keyed on that later state would skip the append.
    """

    identity: tuple[int, int]
    size: int


def write(
    path: str, header: Header, entries: Iterable[tuple[str, npt.ArrayLike]] = (), *, lines: Iterable[bytes] = ()
) -> Written:
    """Replace the sidecar with `header`, the raw `lines` (kept verbatim) and then `entries`.

    Unique tmp in the same directory → fsync → `os.replace`; the caller holds the scope lock.
    A new file keeps `mkstemp`'s 0o600, like the JSONL it sits next to; a replaced one keeps its mode.
    """

    def chunks() -> Iterator[bytes]:
        yield format_header(header).encode("utf-8")
        yield from lines
        for rid, vec in entries:
            yield entry_line(rid, vec).encode("utf-8")

    fd, tmp = fileio.new_tmp(path)
    st = fileio.commit(fd, tmp, path, chunks(), keep_mode=os.path.exists(path))
    return Written((st.st_dev, st.st_ino), st.st_size)


@dataclass(frozen=True)
class Removal:
    """A `remove_ids` rewrite: how many bytes of the old file it covered, and the new file."""

    old_size: int
    written: Written


def remove_ids(path: str, ids: Iterable[str]) -> Removal | None:
    """Rewrite the sidecar without the lines of `ids` (caller holds the scope lock).

    Other complete lines are kept byte for byte (a half-written last line is garbage by now and
    is dropped); a file that holds none of `ids` is left alone and gives None.
    """
    drop = {i.encode("utf-8") for i in ids}
    try:
        fd = fileio.open_regular(path)
    except FileNotFoundError:
        return None
    try:
        data = fileio.read_from(fd)
    finally:
        os.close(fd)
    header = _header_of(data)
    if header is None:
        return None
    body = data[: data.rfind(b"\n") + 1].split(b"\n")[1:]
    present = [ln for ln in body if ln]
    kept = [ln + b"\n" for ln in present if ln.partition(b"\t")[0] not in drop]
    if len(kept) == len(present):
        return None
    return Removal(len(data), write(path, header, lines=kept))
