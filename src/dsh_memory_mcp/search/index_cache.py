"""The lexical index of a big scope file, kept on disk: a big store opens in about one read.

A server's first search at 100k records used to read and parse the scopes it searches (~0.5 s)
and then tokenize every record into the lexical index (~2.5 s with stemming and term counts).
`IndexCache` keeps the index's text tables (postings, term frequencies, lengths) per scope file
in ``<store>/.index/<sha1 of the file's path in the store>.idx`` (directory 0700, files 0600; a
dot-folder, which DSH ignores). A later process still reads and parses the JSONL file itself, as
always; only the tokenizing is skipped, and only where it provably gives the same tables:

* the cache holds, for each record it indexed, a 16-byte BLAKE2b digest of exactly the text the
  tokenizer saw (`scoring.indexed_text`: content and tags). The cached tables are used when the
  file's first records have those very texts, position by position — after an append (ours or a
  foreign writer's: the new records are indexed on top) or a rewrite that changed no text (a
  touch flush, an expiry). A record removed, inserted or edited before the end makes the
  digests disagree: a full build, and a new cache file some seconds later.
* the file is keyed by the cache format, the tokenizer's `scoring.INDEX_VERSION`, the Python
  version (the token lists are `marshal` data) and ends with a BLAKE2b digest of everything
  before it (header and sections, written as streamed pieces, never one copy of every
  posting), checked before any section is used, so a torn, damaged or foreign cache file is
  ignored, never half-used.

The JSONL file stays the only truth: nothing of a record comes from the cache, and a cache that
cannot be read or written is only logged. It is written in a background thread some seconds
after an index was built whole or grew by a tenth past what the file on disk covers (and at
`close`), never by read-only commands. Parsed records are not cached: rebuilding them from a
cached form measured no faster than the JSON parse.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import marshal
import os
import sys
import threading
import weakref
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.snapshots import DERIVED_KEY, Rows, ScopeSnapshot

__all__ = ["CACHE_DIR", "FORMAT", "IndexCache"]

log = logging.getLogger("dsh_memory_mcp.search.index_cache")

CACHE_DIR = ".index"
#: Bump when what is stored or how it is laid out changes.
FORMAT = 2
_MAGIC = b"DSHIDX\n"
_TRAILER = 129  # the BLAKE2b of all before it, in hex, and a newline
_DIGEST = 16
#: A cache file larger than this is not read (nothing we write comes near it).
_MAX_FILE = 1 << 31


def _digest(raw: bytes) -> bytes:
    return hashlib.blake2b(raw, digest_size=_DIGEST).digest()


def _key() -> dict[str, Any]:
    """What a cache file must have been written with to be read here."""
    return {
        "format": FORMAT,
        "index": scoring.INDEX_VERSION,
        "python": list(sys.version_info[:2]),
        "marshal": marshal.version,
        "byteorder": sys.byteorder,
        "itemsize": array("I").itemsize,
    }


class _Entry:
    """One cache file, read: the text digests of the records it indexed, and its text tables."""

    __slots__ = ("digests", "lexical", "n")

    def __init__(self, digests: bytes, lexical: dict[str, memoryview]) -> None:
        self.digests = digests
        self.n = len(digests) // _DIGEST
        self.lexical = lexical


def text_digests(records: Sequence[Record], n: int) -> bytes:
    """The digests of the texts the tokenizer sees of the first `n` records, concatenated."""
    text = scoring.indexed_utf8
    head = records.prefix(n) if isinstance(records, Rows) else records[:n]
    return b"".join(_digest(text(r)) for r in head)


class _Hook:
    """Kept in a snapshot's cache (`DERIVED_KEY`), carried to its file's later versions: the
    cached lexical tables for the first build, and a save when the index outgrew the cache."""

    __slots__ = ("_cache", "_kept", "_latest", "_seeded", "path", "scope")

    def __init__(self, cache: IndexCache, path: str, scope: str) -> None:
        self._cache = cache
        self.path = path
        self.scope = scope
        self._seeded = False
        #: The index made from the cache file, until an index of the file is built (from it or not).
        self._kept: scoring.LexicalIndex | None = None
        #: The index of this file built last, while something still holds it.
        self._latest: weakref.ref[scoring.LexicalIndex] | None = None

    def seed(self, records: Sequence[Record]) -> scoring.LexicalIndex | None:
        """An index of the first records of `records` from the cached tables, when those records
        have exactly the cached texts in the same places; else None (build it).

        The cache file is read once per file and process. Asked again — for another version of
        the file than the one that got the seed (another process's touch flush replaced the file
        between the warm-up's read and a search's: the search's version never received the seed
        and tokenized every record again) — it answers the seed itself until an index was built,
        then the index built last: `LexicalIndex.build` extends or reuses either when the texts
        allow, and builds afresh otherwise.
        """
        if len(records) < self._cache.min_records:
            return None
        if self._seeded:
            latest = self._latest() if self._latest is not None else None
            return self._kept if self._kept is not None else latest
        self._seeded = True  # the first build of this process only; later ones extend it
        entry = self._cache._read(self.path, self.scope)
        if entry is None:
            return None
        n = entry.n
        if n == 0 or len(records) < n or text_digests(records, n) != entry.digests:
            self._cache.stats["stale"] += 1
            return None
        try:
            postings, tf, length = _tables(entry.lexical, n)
        except (TypeError, ValueError, IndexError, EOFError) as exc:
            log.debug("cached index of %s unusable: %s", self.path, exc)
            self._cache.stats["stale"] += 1
            return None
        prefix = records.prefix(n) if isinstance(records, Rows) else tuple(records[:n])
        self._cache.stats["seeded"] += 1
        log.debug("lexical index of %s: %d of %d records from the cache", self.path, n, len(records))
        self._kept = scoring.LexicalIndex.from_tables(prefix, postings, tf, length)
        return self._kept

    def built(self, index: scoring.LexicalIndex, previous: scoring.LexicalIndex | None) -> None:
        # A weak reference: the hook lives as long as the file's versions and must not keep an
        # old version's records alive; the newest index is held by its snapshot anyway.
        self._kept = None
        self._latest = weakref.ref(index)
        self._cache.note(self, index, previous)


_SECTIONS = ("digests", "tokens", "counts", "postings", "tf_tokens", "tf_counts", "tf", "length")


def _tables(lexical: dict[str, memoryview], n: int) -> tuple[dict[str, array[int]], dict[str, array[int]], array[int]]:
    """The text tables of a cache file's sections, each posting list an array of its own (read
    straight from the file's bytes: no intermediate array of every posting)."""
    tokens = marshal.loads(lexical["tokens"])
    counts = array("I")
    counts.frombytes(lexical["counts"])
    flat = lexical["postings"]
    size = array("I").itemsize
    if not isinstance(tokens, list) or len(counts) != len(tokens) or sum(counts) * size != len(flat):
        raise ValueError("postings do not add up")
    postings: dict[str, array[int]] = {}
    at = 0
    for token, count in zip(tokens, counts, strict=True):
        plist = array("I")
        plist.frombytes(flat[at : at + count * size])
        postings[token] = plist
        at += count * size
    tf_tokens = marshal.loads(lexical["tf_tokens"])
    tf_counts = array("I")
    tf_counts.frombytes(lexical["tf_counts"])
    tf_flat = lexical["tf"]
    if not isinstance(tf_tokens, list) or len(tf_counts) != len(tf_tokens) or sum(tf_counts) != len(tf_flat):
        raise ValueError("term frequencies do not add up")
    tf: dict[str, array[int]] = {}
    at = 0
    for token, count in zip(tf_tokens, tf_counts, strict=True):
        if len(postings.get(token, ())) != count:
            raise ValueError("term frequencies do not match their postings")
        counts_of = array("B")
        counts_of.frombytes(tf_flat[at : at + count])
        tf[token] = counts_of
        at += count
    length = array("I")
    length.frombytes(lexical["length"])
    if len(length) != n:
        raise ValueError("lengths do not match the records")
    return postings, tf, length


class IndexCache:
    """The derived-data cache of one store (`snapshots.Derived`); safe to share between threads.

    :param root: the store directory (the cache lives in ``<root>/.index``).
    :param read_only: read caches, never write one (the human read commands).
    :param save_delay: seconds between the need to save and the save (coalesced per file).
    :param min_records: scopes with fewer records are not worth a cache file.
    """

    def __init__(self, root: str, *, read_only: bool = False, save_delay: float = 5.0, min_records: int = 2000) -> None:
        self.root = os.path.abspath(root)
        self.dir = os.path.join(self.root, CACHE_DIR)
        self.read_only = read_only
        self.save_delay = save_delay
        self.min_records = min_records
        #: loads (cache files read and accepted), stale (present but not usable: damaged,
        #: another version, texts that differ), seeded (lexical indexes from cached tables), saves.
        self.stats: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._on_disk: dict[str, int] = {}  # path → records the cache file on disk covers
        self._due: dict[str, tuple[str, scoring.LexicalIndex]] = {}  # path → (scope, index) to save
        self._timer: threading.Timer | None = None
        self._closed = False

    def cache_path(self, path: str) -> str:
        rel = os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
        return os.path.join(self.dir, hashlib.sha1(rel.encode("utf-8")).hexdigest() + ".idx")

    # -- reading (`snapshots.Derived`) -------------------------------------------------------

    def loaded(self, snap: ScopeSnapshot) -> None:
        """`snapshots.Derived`: give `snap` the hook its first lexical build asks (`seed`)."""
        snap.cache[DERIVED_KEY] = _Hook(self, snap.path, snap.scope)

    def _read(self, path: str, scope: str | None) -> _Entry | None:
        cache_file = self.cache_path(path)
        try:
            fd = fileio.open_regular(cache_file, follow=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.debug("index cache %s not readable: %s", cache_file, exc)
            return None
        try:
            with open(fd, "rb") as f:
                if os.fstat(f.fileno()).st_size > _MAX_FILE:
                    return self._stale(cache_file, "too large")
                data = f.read()
        except OSError as exc:
            log.debug("index cache %s not readable: %s", cache_file, exc)
            return None
        try:
            if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _TRAILER:
                return self._stale(cache_file, "not a cache file")
            end = data.index(b"\n", len(_MAGIC))
            header = json.loads(data[len(_MAGIC) : end])
            view = memoryview(data)
            body = view[end + 1 : len(data) - _TRAILER]
            if not isinstance(header, dict) or header.get("key", {}).get("format") != FORMAT:
                return self._stale(cache_file, "another format")
            key = header["key"]
            if {k: v for k, v in key.items() if k != "index"} != {k: v for k, v in _key().items() if k != "index"}:
                return self._stale(cache_file, "written by another Python or format")
            if scope is not None and header.get("scope") != scope:
                return self._stale(cache_file, "another scope")
            # The trailer digests everything before it, the header (section sizes) included.
            if hashlib.blake2b(view[: len(data) - _TRAILER]).hexdigest().encode("ascii") + b"\n" != data[-_TRAILER:]:
                return self._stale(cache_file, "damaged (digest)")
            if key.get("index") != scoring.INDEX_VERSION:
                return self._stale(cache_file, "another tokenizer")
            sizes = header["sections"]
            if (
                not isinstance(sizes, list)
                or len(sizes) != len(_SECTIONS)
                or not all(type(size) is int and size >= 0 for size in sizes)
                or sum(sizes) != len(body)
            ):
                return self._stale(cache_file, "inconsistent")
            lexical: dict[str, memoryview] = {}
            at = 0
            for name, size in zip(_SECTIONS, sizes, strict=True):
                lexical[name] = body[at : at + size]
                at += size
            digests = bytes(lexical.pop("digests"))
            if len(digests) % _DIGEST or len(digests) // _DIGEST != header.get("records"):
                return self._stale(cache_file, "inconsistent")
        except (ValueError, TypeError, KeyError, EOFError, AttributeError) as exc:
            return self._stale(cache_file, f"unreadable ({type(exc).__name__})")
        self.stats["loads"] += 1
        entry = _Entry(digests, lexical)
        with self._lock:
            self._on_disk[path] = entry.n
        return entry

    def _stale(self, cache_file: str, why: str) -> _Entry | None:
        """Count and log why a cache file is not used; None, for the reader to return."""
        self.stats["stale"] += 1
        log.debug("index cache %s ignored: %s", cache_file, why)
        return None

    # -- writing -----------------------------------------------------------------------------

    def note(self, hook: _Hook, index: scoring.LexicalIndex, previous: scoring.LexicalIndex | None) -> None:
        """An index of `hook`'s file was built: save it (soon) when the file on disk is behind."""
        if self.read_only or len(index) < self.min_records:
            return
        with self._lock:
            covered = self._on_disk.get(hook.path, 0)
            grown = previous is not None and index.text_tables()[0] is previous.text_tables()[0]
            if grown and len(index) - covered < max(self.min_records, covered // 10):
                return  # the cache still serves all but a few of its records
            self._due[hook.path] = (hook.scope, index)
            if self._timer is None and not self._closed:
                self._timer = threading.Timer(self.save_delay, self._save_due)
                self._timer.daemon = True
                self._timer.start()

    def _save_due(self) -> None:
        with self._lock:
            due, self._due = self._due, {}
            self._timer = None
        for path, (scope, index) in due.items():
            self.save(path, scope, index)

    def save(self, path: str, scope: str, index: scoring.LexicalIndex) -> bool:
        """Write the cache file of `path` for `index` (its records and text tables) now."""
        if self.read_only:
            return False
        records = index.records
        n = len(records)
        try:
            sections = _sections(index, text_digests(records, n), n)
            header = {"key": _key(), "scope": scope, "records": n, "sections": [size for size, _ in sections]}
            target = self.cache_path(path)
            os.makedirs(self.dir, mode=0o700, exist_ok=True)
            fileio.remove_leftover_tmps(self.dir)  # of writers that died mid-save
            fd, tmp = fileio.new_tmp(target)
            try:
                with open(fd, "wb") as f:
                    head = _MAGIC + json.dumps(header).encode("utf-8") + b"\n"
                    f.write(head)
                    digest = hashlib.blake2b(head)
                    for _size, pieces in sections:
                        for piece in pieces():
                            digest.update(piece)
                            f.write(piece)
                    f.write(digest.hexdigest().encode("ascii") + b"\n")
                os.replace(tmp, target)  # no fsync: a cache lost in a crash is rebuilt
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except (OSError, ValueError) as exc:
            log.warning("未能写入索引缓存 %s(%s);不影响使用,下次启动会重新建立", self.dir, exc)
            return False
        self.stats["saves"] += 1
        with self._lock:
            self._on_disk[path] = n
        return True

    def close(self) -> None:
        """Save what is due now and stop the timer. Idempotent."""
        with self._lock:
            self._closed = True
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        self._save_due()


def _sections(index: scoring.LexicalIndex, digests: bytes, n: int) -> list[tuple[int, Callable[[], Iterator[bytes]]]]:
    """The cache file's sections (`_SECTIONS`) as (size, pieces): each posting list is written
    from a copy of its part, one at a time, never from one array of every posting (a ~40 MB peak
    at 100k records) nor from the live array (which another thread may be growing)."""
    postings, tf, length = index.text_tables()
    parts = [(token, scoring.visible(plist, n)) for token, plist in list(postings.items())]
    parts = [(token, k) for token, k in parts if k]
    tf_parts = [(token, k) for token, k in parts if len(tf.get(token, ())) >= k and token in tf]
    size = array("I").itemsize
    tokens = marshal.dumps([token for token, _ in parts])
    tf_tokens = marshal.dumps([token for token, _ in tf_parts])
    counts = array("I", (k for _, k in parts)).tobytes()
    tf_counts = array("I", (k for _, k in tf_parts)).tobytes()

    def one(data: bytes) -> Callable[[], Iterator[bytes]]:
        return lambda: iter((data,))

    def postings_pieces() -> Iterator[bytes]:
        for token, k in parts:
            yield postings[token][:k].tobytes()

    def tf_pieces() -> Iterator[bytes]:
        for token, k in tf_parts:
            yield tf[token][:k].tobytes()

    return [
        (len(digests), one(digests)),
        (len(tokens), one(tokens)),
        (len(counts), one(counts)),
        (sum(k for _, k in parts) * size, postings_pieces),
        (len(tf_tokens), one(tf_tokens)),
        (len(tf_counts), one(tf_counts)),
        (sum(k for _, k in tf_parts), tf_pieces),
        (n * size, one(length[:n].tobytes())),
    ]
