"""Whether a save's content can already be in a scope file, from its bytes alone (no parse).

A save dedupes against the live records of its scope whose ``content.strip()`` equals its own.
Finding those takes the scope parsed and its content index built: at 100k records ~0.4 s of CPU,
which every freshly started server paid on its first save while 15 others did the same.

The bytes can often prove there is no such record. JSON has one spelling per string once two
escapes are ruled out: ``\\u`` (any character may be written so; lone surrogates and control
characters must be) and ``\\/``. Every other escape is the only way to write its character
(``\\"`` ``\\\\`` ``\\n`` ``\\r`` ``\\t`` ``\\b`` ``\\f``), and raw UTF-8 is the only other way
to write the rest — which is how we, DSH and `JSON.stringify` write. In a file without ``\\u``
or ``\\/``, a record whose content contains the text has the text's JSON spelling (without its
quotes) among its bytes, because that spelling is made character by character. So when that
spelling is nowhere in the file, no record can be a duplicate. Anything else (the spelling
found anywhere, in any field or in a corrupt line; an escape that breaks the argument; the file
changed other than by growing) says "maybe", and the caller parses as before.

`scan` reads a whole file (in 1 MB pieces), before the scope lock; `still_absent` looks, under
the lock, at what was appended since, after checking the file only grew (same inode, the bytes at
both ends of the old length unchanged — `snapshots._read_tail`'s test).

A scan answers for one text. For the saves after it, while the process still has not parsed the
file, `contents` reads it once more and keeps what every later save needs: the hashes of the
stripped spellings of all its content values (`Contents`, ~1/3 of a parse's CPU, ~4 MB at 50k
records). A save whose text's hash is not among them, nor among those `Contents.grown` finds in
what was appended since (under the lock), is new. The values are found as ``"content":"…"``,
and only when that finds every ``"content"`` in the file — a key spaced otherwise, or a value
that is the word itself, and the file is parsed instead. A value with whitespace or an escape
at either end is decoded and stripped the way `str.strip` strips, then spelled again.

The same argument serves a look-up by id (`lacks_ids`): a get or forget by id searches every
scope, and a file that holds none of the wanted ids' spellings need not be parsed. Ids match
case-insensitively (by ``str.lower``), so the file's bytes are lower-cased as ASCII before the
search, and a file holding one of the two characters whose lower case is ASCII (``İ``, the
Kelvin sign) is parsed.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from dsh_memory_mcp.store import fileio

__all__ = ["Contents", "Scan", "contents", "id_needle", "lacks_ids", "needle", "scan", "still_absent"]

#: Two escapes that give a character a second JSON spelling; a file with either is not scanned.
_AMBIGUOUS = (b"\\u", b"\\/")
#: Characters whose lower case is (or begins with) an ASCII letter, as UTF-8: ``İ`` and ``K``
#: (U+0130, U+212A — the only two): an id with one matches a prefix its ASCII-lowered bytes lack.
_LOWERS_TO_ASCII = ("\u0130".encode(), "\u212a".encode())
#: What makes a file unfit for an id scan: an id could be spelled there other than its bytes.
_ID_UNSAFE = _AMBIGUOUS + _LOWERS_TO_ASCII
#: Bytes kept from both ends of the scanned length, to tell later that the file only grew.
PROBE = 4096
#: Bytes read at a time.
CHUNK = 1 << 20


@dataclass(frozen=True)
class Scan:
    """A file seen to hold neither ambiguous escapes nor the needle, up to `size`."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    head: bytes
    tail: bytes

    @property
    def identity(self) -> tuple[int, int, int, int]:
        return (self.dev, self.ino, self.size, self.mtime_ns)

    def only_grew(self, fd: int, st: os.stat_result) -> bool:
        """Whether the open file `fd` (`st` its stat) is this version, perhaps with bytes appended:
        the same inode, no shorter, the bytes at both ends of the old length unchanged
        (`snapshots._read_tail`'s test).

        :raises OSError: it cannot be read.
        """
        return (
            (st.st_dev, st.st_ino) == (self.dev, self.ino)
            and st.st_size >= self.size
            and os.pread(fd, len(self.head), 0) == self.head
            and os.pread(fd, len(self.tail), self.size - len(self.tail)) == self.tail
        )


def needle(text: str) -> bytes | None:
    """The JSON spelling of `text` without its quotes, as raw UTF-8; None when there is none to
    look for (empty, or a character only ``\\u`` can write: then the file would hold ``\\u``)."""
    spelled = json.dumps(text, ensure_ascii=False)[1:-1]
    if not spelled or "\\u" in spelled:
        return None
    try:
        return spelled.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return None


#: A content key with a string value, as we, DSH and `JSON.stringify` write it: the value's JSON
#: spelling (escapes kept; never across a line).
_CONTENT_VALUE = re.compile(rb'"content":"((?:[^"\\\n]++|\\.)*+)"')
_CONTENT_WORD = b'"content"'
#: A line longer than this (a huge record another program wrote) ends a `contents` read: parse.
_LINE_MAX = 4 * CHUNK


@functools.cache
def _space_bytes() -> tuple[frozenset[int], frozenset[int]]:
    """The bytes a raw whitespace character (as `str.isspace` has it; all in the BMP) can start and
    end with in UTF-8, the escape's backslash among the first: a value starting and ending
    otherwise has nothing to strip."""
    spaces = [chr(c).encode("utf-8") for c in range(0x20, 0x10000) if chr(c).isspace()]
    return frozenset({s[0] for s in spaces} | {0x5C}), frozenset(s[-1] for s in spaces)


def _stripped(value: bytes) -> bytes:
    """The spelling of the stripped text of the spelling `value` (`value` itself when nothing at
    either end is whitespace or an escape: the common case, two byte look-ups)."""
    first, last = _space_bytes()
    if not value or (value[0] not in first and value[-1] not in last and value[-2:-1] != b"\\"):
        return value
    if not (
        value[:1] == b"\\"
        or value[-2:-1] == b"\\"
        or value[:4].decode("utf-8", "ignore")[:1].isspace()
        or value[-4:].decode("utf-8", "ignore")[-1:].isspace()
    ):
        return value
    try:
        text = json.loads(b'"' + value + b'"')
    except ValueError:  # not a JSON string (a corrupt line): as it is, it matches nothing we look for
        return value
    return needle(text.strip()) or value


def _content_hashes(data: bytes, into: set[int], *, escapes: bool = True) -> bool:
    """Add the hashes of the stripped spellings of the content values in `data` (whole lines);
    False when `data` holds an ambiguous escape (not looked for without `escapes`: a scan found
    none there) or a ``"content"`` that is not such a value."""
    if escapes and any(bad in data for bad in _AMBIGUOUS):
        return False
    values = _CONTENT_VALUE.findall(data)
    if len(values) != data.count(_CONTENT_WORD):
        return False
    into.update(hash(_stripped(v)) for v in values)
    return True


def _read_contents(fd: int, start: int, end: int, into: set[int], *, clean: int = 0) -> bytes | None:
    """`_content_hashes` of bytes [start, end) of `fd`, read in pieces cut at a newline; the last
    `PROBE` bytes read, or None (ambiguous, a line too long, a last line without its newline, the
    file shorter than `end`). Bytes below `clean` are known to hold no ambiguous escape."""
    rest = b""
    last = b""
    at = start
    while at < end:
        piece = os.pread(fd, min(CHUNK, end - at), at)
        if not piece:
            return None
        at += len(piece)
        last = (last + piece)[-PROBE:]
        data = rest + piece
        cut = data.rfind(b"\n") + 1
        if not _content_hashes(data[:cut], into, escapes=at - len(data) + cut > clean):
            return None
        rest = data[cut:]
        if len(rest) > _LINE_MAX:
            return None
    return None if rest else last


@dataclass
class Contents:
    """A file as far as `seen`: no ambiguous escape, whole lines, and `hashes` — those of the
    stripped spelling of every content value in it (`needle` of the stripped text, hashed)."""

    seen: Scan
    hashes: set[int] = field(repr=False)

    def holds(self, wanted: bytes) -> bool:
        """Whether a record there may have the text spelled `wanted` (a hash collision says yes)."""
        return hash(wanted) in self.hashes

    def grown(self, path: str) -> tuple[int, int, int, int] | None:
        """Under the scope lock: take in the hashes of what was appended since `seen` (then `seen`
        moves there) and say the file's identity now; None when it did not only grow by clean
        whole lines, or cannot be read. Ask `holds` after it: what another thread of the process
        took in while this one waited for the lock counts as much as what this call found."""
        seen = self.seen
        fd = _open(path)
        if fd is None:
            return None
        try:
            st = os.fstat(fd)
            now = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if now == seen.identity:
                return now
            if st.st_size == seen.size or not seen.only_grew(fd, st):
                return None
            added: set[int] = set()
            last = _read_contents(fd, seen.size, st.st_size, added)
        except OSError:
            return None
        finally:
            os.close(fd)
        if last is None:
            return None
        self.seen = Scan(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, seen.head, (seen.tail + last)[-PROBE:])
        self.hashes |= added
        return now


def contents(path: str, *, min_size: int, scanned: Scan | None = None) -> Contents | None:
    """`Contents` of the regular file at `path`, of at least `min_size` bytes, as far as it is
    now; None when it holds an ambiguous escape, a ``"content"`` written otherwise, a last line
    without its newline, or cannot be read. `scanned`: an earlier `scan` of it, whose bytes are
    not searched for escapes again when the file only grew since."""
    opened = _open_at_least(path, min_size)
    if opened is None:
        return None
    fd, st = opened
    hashes: set[int] = set()
    try:
        clean = scanned.size if scanned is not None and scanned.only_grew(fd, st) else 0
        last = _read_contents(fd, 0, st.st_size, hashes, clean=clean)
        head = os.pread(fd, PROBE, 0)[: st.st_size] if last is not None else b""
    except OSError:
        return None
    finally:
        os.close(fd)
    if last is None:
        return None
    return Contents(Scan(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, head, last), hashes)


def _clean(data: bytes, wanted: bytes) -> bool:
    return all(bad not in data for bad in _AMBIGUOUS) and wanted not in data


def _windows(fd: int, start: int, end: int, keep: int) -> Iterator[bytes | None]:
    """Bytes [start, end) of `fd` in pieces, each after the `keep` bytes before it (so a match
    across a border is whole in one), read with `os.pread` — not mmap: a file cut short by another
    program while mapped kills the process with SIGBUS. None last when the file ended early
    (changed under us)."""
    carry = b""
    at = start
    while at < end:
        piece = os.pread(fd, min(CHUNK, end - at), at)
        if not piece:
            yield None
            return
        yield carry + piece
        carry = piece[-keep:]
        at += len(piece)


def _clean_from(fd: int, start: int, end: int, wanted: bytes) -> bool:
    """Whether bytes [start, end) of `fd` are clean (`_clean`)."""
    keep = max(len(wanted), 2) - 1
    return all(data is not None and _clean(data, wanted) for data in _windows(fd, start, end, keep))


def _open(path: str) -> int | None:
    """A descriptor of the regular file at `path`, or None (missing, unreadable, a FIFO, a device…)."""
    try:
        return fileio.open_regular(path)
    except OSError:
        return None


def _open_at_least(path: str, min_size: int) -> tuple[int, os.stat_result] | None:
    """A descriptor of the regular file at `path` and its stat, when it has at least `min_size`
    bytes; else None (and nothing left open)."""
    fd = _open(path)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if st.st_size < min_size:
        os.close(fd)
        return None
    return fd, st


def scan(path: str, wanted: bytes, *, min_size: int) -> Scan | None:
    """The file at `path` as far as it is now, when it is a regular file of at least `min_size`
    bytes that cannot hold a record with `wanted`; else None (also when it cannot be read)."""
    opened = _open_at_least(path, min_size)
    if opened is None:
        return None
    fd, st = opened
    try:
        if not _clean_from(fd, 0, st.st_size, wanted):
            return None
        head = os.pread(fd, PROBE, 0)[: st.st_size]
        tail = os.pread(fd, PROBE, max(0, st.st_size - PROBE))[: st.st_size]
    except OSError:
        return None
    finally:
        os.close(fd)
    return Scan(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, head, tail)


def still_absent(path: str, seen: Scan, wanted: bytes) -> tuple[int, int, int, int] | None:
    """The file's identity now when it is `seen` or `seen` grown by appends that hold neither
    ambiguous escapes nor `wanted` (looked at across the old end too); else None."""
    fd = _open(path)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        now = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if now == seen.identity:
            return now
        if st.st_size == seen.size or not seen.only_grew(fd, st):
            return None
        overlap = min(seen.size, max(len(wanted), 2) - 1)
        return now if _clean_from(fd, seen.size - overlap, st.st_size, wanted) else None
    except OSError:
        return None
    finally:
        os.close(fd)


def id_needle(prefix: str) -> bytes | None:
    """The bytes a lower-cased id prefix has in a file lower-cased as ASCII, or None when a scan
    cannot decide: a character outside ASCII (its other case has other bytes) or one JSON writes
    as an escape (a quote, a backslash, a control character)."""
    if not prefix or not prefix.isascii() or any(c in '"\\' or c < " " for c in prefix):
        return None
    return prefix.encode("ascii")


def lacks_ids(
    path: str, needles: list[bytes], *, min_size: int, clean: dict[str, tuple[int, ...]] | None = None
) -> bool:
    """Whether the regular file at `path`, of at least `min_size` bytes, provably holds no record
    whose lower-cased id starts with one of `needles` (`id_needle`): none of them anywhere in its
    ASCII-lowered bytes, and no escape or character that could spell an id otherwise. False
    means "maybe" (also: smaller, unreadable, not a regular file): parse it.

    `clean` remembers, by path, the version (identity) of files seen to hold no such escape or
    character: a later look-up in the same version only searches for its needles.
    """
    if not needles:
        return False
    opened = _open_at_least(path, min_size)
    if opened is None:
        return False
    fd, st = opened
    try:
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        known = clean is not None and clean.get(path) == identity
        keep = max(*map(len, needles), *map(len, _ID_UNSAFE)) - 1
        for data in _windows(fd, 0, st.st_size, keep):
            if data is None:
                return False
            if not known and any(bad in data for bad in _ID_UNSAFE):
                return False
            low = data.lower()
            if any(n in low for n in needles):
                return False
    except OSError:
        return False
    finally:
        os.close(fd)
    if clean is not None:
        clean[path] = identity
    return True
