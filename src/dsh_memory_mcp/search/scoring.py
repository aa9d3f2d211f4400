"""Search scoring: tokenizer, per-scope lexical index, fusion and the hybrid ranking (docs/design.md: Search).

Pure code over `records.Record`: nothing here reads files, locks or talks to a backend. The index
of a snapshot is kept in `snapshot.cache["lexical"]`, so a search over an unchanged scope only
tokenizes the query and walks the posting lists of its tokens.

Tokens (one function for records and queries, so they always agree): NFKC, case-folded. A CJK run
gives its bigrams (the cheap stand-in for words) and its single characters, which are *weak*
(`is_weak_token`). A word joined by ``_ - . / \\`` gives the compound (a rare, exact token) and
every part. camelCase is split only when the word starts lower-case (a code identifier):
``JavaScript`` stays whole, or ``java`` would be a perfect hit on it. Plain ASCII words of letters
are stemmed (Snowball English), never compounds, words with digits or other scripts, nor
`STOP_WORDS`, which never carry a hit on their own.

Scores (`LexicalIndex.scores`): whether a record is a hit is the IDF-weighted share of the query's
distinct tokens it holds, against the thresholds; how strong a hit is, is BM25 on the same 0–1 scale
(``dl`` counts no single CJK characters, so Chinese and English lengths compare), longer-than-average
records counting less and shorter ones not lifted. N, ``Σ dl`` and each token's ``df`` give IDF and
avgdl at query time, so an append extends the index in O(new records). IDF is the BM25 form
``ln(1 + (N + 3 - df + 0.5) / (df + 0.5))``: light for a token most records hold, and its prior of
3 token-less records keeps a one-record scope's words from counting for nothing.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from array import array
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Protocol

from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.scopes import GLOBAL, scope_rank

#: Key of the lexical index in `snapshot.cache`.
CACHE_KEY = "lexical"
#: Optional key where a store may put the previous file version's index (see `index_for`).
PREVIOUS_CACHE_KEY = "lexical_previous"
#: Key of the lock that makes threads asking for one snapshot's index at once wait for one build.
BUILD_LOCK_KEY = "lexical_build_lock"
#: Lexical thresholds (docs/design.md: Search): a record sharing a strong token (word or CJK bigram) with the query.
GLOBAL_THRESHOLD = 0.12
SCOPE_THRESHOLD = 0.10
#: A record sharing only single CJK characters with the query needs at least this share.
WEAK_ONLY_THRESHOLD = 0.25
#: A strong token in more than this share of a scope of at least `COMMON_MIN_RECORDS` is common (`LexicalIndex.common`).
COMMON_SHARE = 0.25
COMMON_MIN_RECORDS = 20
#: Virtual records added to N in the IDF, so one- or two-record scopes do not zero out their words.
IDF_PRIOR_RECORDS = 3
#: English function words (case-folded) that never count as a strong hit nor make a hit on their own.
STOP_WORDS = frozenset(
    """
    a an the
    i me my mine you your yours he him his she her hers it its we us our ours they them their theirs
    this that these those there here
    is am are was were be been being do does did done have has had having
    will would shall should can could may might must
    of to in on at by for from with about into onto over under than as
    and or but if then so
    what which who whom whose when where why how
    """.split()  # noqa: SIM905 - a word list reads better as text
)
#: Vector scores below this are noise (the seed's cosine gate), whatever the caller passed; a
#: vector score is ``0.5 + 0.5·P(relevant)`` (`search.calibration`, `fuse`).
MIN_COSINE = 0.5
#: BM25's term-frequency saturation and length normalisation: b is a third of the usual 0.75 and
#: only records longer than average are normalised (short dialogue turns rarely carry the content).
BM25_K1 = 1.2
BM25_B = 0.3

# Float sums of the same weights in another order can differ in the last bit; a share that is
# mathematically equal to a threshold must not fail it.
_EPSILON = 1e-9

# CJK code points: hangul jamo, CJK radicals, 々〆〇, hiragana, katakana (without the punctuation
# ゠ and ・), hangul compatibility jamo, katakana extensions, Han extension A, unified Han, hangul
# jamo extensions and syllables, compatibility ideographs, kana supplements, Han extensions B–I and
# the compatibility supplement.
_CJK_RANGES = (
    "\u1100-\u11ff"
    "\u2e80-\u2fdf"
    "\u3005-\u3007"
    "\u3041-\u309f"
    "\u30a1-\u30fa\u30fc-\u30ff"
    "\u3130-\u318f"
    "\u31f0-\u31ff"
    "\u3400-\u4dbf"
    "\u4e00-\u9fff"
    "\ua960-\ua97f"
    "\uac00-\ud7ff"
    "\uf900-\ufaff"
    "\U0001b000-\U0001b16f"
    "\U00020000-\U000323af"
)
# `[^\W_]` is exactly `str.isalnum()` for str patterns; CJK is carved out so it gets bigrams.
_ALNUM = f"[^\\W_{_CJK_RANGES}]"
# Words first: the two never start on the same character, and most matches are words (faster).
_TOKEN_RE = re.compile(f"(?P<word>{_ALNUM}+(?:[-_./\\\\]{_ALNUM}+)*)|(?P<cjk>[{_CJK_RANGES}]+)")
_JOINERS_RE = re.compile(r"[-_./\\]")
_CJK_CHAR_RE = re.compile(f"[{_CJK_RANGES}]")


def _camel_parts(word: str) -> list[str]:
    """Pieces of a lowerCamel identifier (``parseHTTPResponse`` → parse, HTTP, Response), else [].

    Only words that start lower-case and contain an upper-case letter are split (see the module
    docstring). Boundaries are lower/digit → upper, and the last capital of an upper-case run
    that starts a capitalised piece; digits stay attached (``sha1Hex`` → sha1, Hex).
    """
    if not word[:1].islower() or word.islower():
        return []
    parts: list[str] = []
    start = 0
    for i in range(1, len(word)):
        ch = word[i]
        if not ch.isupper():
            continue
        prev = word[i - 1]
        if not prev.isupper() or (i + 1 < len(word) and word[i + 1].islower()):
            parts.append(word[start:i])
            start = i
    parts.append(word[start:])
    return parts if len(parts) > 1 else []


_stems: dict[str, str] = {}
_words: dict[str, tuple[str, ...]] = {}
_stem_lock = threading.Lock()
_stemmer: Any = None
#: Each memo (stems, words' tokens) is cleared at this many words (a vocabulary is far smaller).
MAX_MEMO_WORDS = 200_000


def stem(word: str) -> str:
    """The English stem of a case-folded word, or the word itself. Memoised (the stemmer costs
    ~40 µs a word); the stemmer object keeps state while it works, so calls into it are serialised."""
    got = _stems.get(word)
    if got is not None:
        return got
    if not (word.isascii() and word.isalpha()) or word in STOP_WORDS or len(word) < 3:
        out = word
    else:
        global _stemmer
        with _stem_lock:
            if _stemmer is None:  # imported on first use: loading every language costs ~40 ms
                import snowballstemmer

                _stemmer = snowballstemmer.stemmer("english")
            out = _stemmer.stemWord(word)
    if len(_stems) >= MAX_MEMO_WORDS:
        _stems.clear()
    _stems[word] = out
    return out


def _word_tokens(word: str) -> tuple[str, ...]:
    """The tokens of a word as written: a plain word's stem; a word that has joiners or is
    lowerCamel gives itself, its (stemmed) parts and their camel pieces.

    Memoised as written (so a plain word costs one look-up), next to `stem`'s memo of the
    parts: ``ops-1234`` and ``ops-1235`` are two words with one stemmed part.
    """
    found = _words.get(word)
    if found is not None:
        return found
    folded = word.casefold()
    if word.isalnum() and (word.islower() or not word[:1].islower()):
        found = (stem(folded),)  # a plain word: no joiners, not lowerCamel
    else:
        out = [folded]
        pieces = _JOINERS_RE.split(word)
        for piece in pieces if len(pieces) > 1 else ():
            out.append(stem(piece.casefold()))
        for piece in pieces:
            out.extend(stem(part.casefold()) for part in _camel_parts(piece))
        found = tuple(out)
    if len(_words) >= MAX_MEMO_WORDS:
        _words.clear()
    _words[word] = found
    return found


def tokenize(text: str) -> list[str]:
    """The tokens of `text` in order of appearance (repeats kept), for records and queries alike."""
    return _tokenize(text)[0]


def _tokenize(text: str) -> tuple[list[str], int]:
    """`tokenize`'s tokens and how many of them are single CJK characters (weak tokens)."""
    out: list[str] = []
    extend = out.extend
    words = _words
    weak = 0
    # This loop runs once per word of every record when an index is built, hence the inlining.
    for word, run in _TOKEN_RE.findall(unicodedata.normalize("NFKC", text)):
        if run:
            if len(run) > 1:
                extend(map(str.__add__, run, run[1:]))  # adjacent bigrams
            extend(run)
            weak += len(run)
        else:
            extend(words.get(word) or _word_tokens(word))
    return out, weak


def query_tokens(query: str) -> frozenset[str]:
    """The distinct tokens of a query: the score is a share of these, so repeats must not count twice."""
    return frozenset(tokenize(query))


def query_has_tokens(query: str) -> bool:
    """Whether a query can match anything lexically (a query of punctuation or emoji cannot)."""
    return _TOKEN_RE.search(unicodedata.normalize("NFKC", query)) is not None


def is_weak_token(token: str) -> bool:
    """A single CJK character: too common on its own to count as a strong hit (docs/design.md: Search)."""
    return len(token) == 1 and _CJK_CHAR_RE.match(token) is not None


#: Two texts are near-identical when the Jaccard similarity of their `near_tokens` is at least this
#: (a save names such a memory, the duplicates view groups them).
NEAR_JACCARD = 0.8
#: `LexicalIndex.near` compares at most this many candidates exactly (the best of the prefix filter).
NEAR_CANDIDATES = 16
#: `near` compares at most this many records appended since the last index one by one.
NEAR_UNINDEXED = 8
#: A save's `near` indexes at most this many records first (~40 µs each); beyond, it checks what is indexed.
NEAR_BUILD = 4096
#: `LexicalIndex.near` counts the postings of more of the rarest tokens than the prefix bound
#: needs while they total at most this many.
NEAR_POSTINGS = 20_000


#: The last texts `near_tokens` read and their sets: a save compares its text with the few records
#: appended since the last index (`near`), which are mostly the process's own last saves.
_near_sets: dict[str, frozenset[str]] = {}
NEAR_MEMO = 4 * NEAR_UNINDEXED


def near_tokens(text: str) -> frozenset[str]:
    """The tokens a near-duplicate check compares: `tokenize`'s, without single CJK characters
    (which any two Chinese texts share)."""
    found = _near_sets.get(text)
    if found is None:
        found = frozenset(t for t in tokenize(text) if len(t) > 1 or not _CJK_CHAR_RE.match(t))
        if len(text) <= INDEX_CHARS:  # another program's 50 MB record is not kept alive here
            if len(_near_sets) >= NEAR_MEMO:
                _near_sets.clear()
            _near_sets[text] = found
    return found


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    shared = len(a & b)
    return shared / max(1, len(a) + len(b) - shared)


def is_stop_word(token: str) -> bool:
    """An English function word (`STOP_WORDS`): scores in the share, never a hit on its own."""
    return token in STOP_WORDS


def idf(n_records: int, df: int) -> float:
    """``ln(1 + (N + 3 - df + 0.5) / (df + 0.5))``: BM25 IDF with a prior of 3 token-less records."""
    return math.log(1.0 + (n_records + IDF_PRIOR_RECORDS - df + 0.5) / (df + 0.5))


def lexical_threshold(scope: str) -> float:
    """The share a record needs when it shares a strong token: global, the noisiest scope, asks for more."""
    return GLOBAL_THRESHOLD if scope == GLOBAL else SCOPE_THRESHOLD


def importance_factor(importance: float | None) -> float:
    """``1 + 0.5·(importance − 0.5)``, 0.75…1.25: neutral at 0.5, which absence (or a non-finite
    value) means; values outside 0–1 are clamped."""
    if importance is None or not math.isfinite(importance):
        return 1.0
    return 1.0 + 0.5 * (min(1.0, max(0.0, importance)) - 0.5)


#: Records `_Tables._add_texts` indexes per pass: bounds its temporary arrays (~40 bytes a token).
_BATCH = 4096
#: Up to this many records `_Tables._add_texts` indexes in a plain loop (the same tables): a
#: search after a few saves, a save's `near` past `NEAR_UNINDEXED`.
_FEW = 16


class _Tables:
    """The append-only tables that the indexes of one scope file's successive versions share, so
    an append costs O(new records), not a copy. They only ever grow, in place, and each
    `LexicalIndex` is a view of their first `n` records (posting lists are sorted, so a view's part
    of one is a prefix). Growing needs `lock` and that the grower's view is the newest (`size`);
    another successor of an older view gets copies (`copied`). A table set a rewrite's index took
    over (same texts, new records) is `sealed`: it never grows again.
    """

    __slots__ = (
        "columns",
        "duplicates",
        "first",
        "length",
        "lock",
        "postings",
        "rows",
        "sealed",
        "size",
        "tf",
    )

    def __init__(
        self,
        postings: dict[str, array[int]] | None = None,
        tf: dict[str, array[int]] | None = None,
        length: array[int] | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        #: token → positions (array of unsigned ints, ascending) of the records containing it.
        self.postings: dict[str, array[int]] = {} if postings is None else postings
        #: token → a byte per posting (its term frequency), only for tokens some record repeats.
        self.tf: dict[str, array[int]] = {} if tf is None else tf
        #: Per record: its length in tokens (single CJK characters not counted), its importance factor.
        self.length: array[int] = array("I") if length is None else length
        #: id → first position, and the positions of ids found more than once; built on first use
        #: (only the vector channel asks), then kept up to date.
        self.first: dict[str, int] | None = None
        self.duplicates: dict[str, list[int]] = {}
        self.size = 0  # records covered by the per-record tables
        #: The records they were last grown with (``len(rows) == size``): a later version whose
        #: records continue the same list may go on from there (`LexicalIndex.build`).
        self.rows: Sequence[Record] = ()
        self.sealed = False
        #: Held to grow or copy them; shared by the tables that share these postings (a handover).
        self.lock = threading.Lock() if lock is None else lock
        #: The per-record tables as numpy columns for the search (`_Columns`), made on the first
        #: search and extended by what was appended since.
        self.columns: _Columns | None = None

    def grow(self, recs: Sequence[Record], start: int, *, texts: bool = True) -> None:
        """Index ``recs[start:]`` as positions ``start…`` (lock held). `texts` False: the postings
        already hold them (a rewrite that kept every text), only the per-record tables grow."""
        if texts:
            for lo in range(start, len(recs), _BATCH):
                self._add_texts(recs, lo, min(len(recs), lo + _BATCH))
        first = self.first
        if first is not None:
            for pos, record in enumerate(recs[start:], start):
                _note_id(first, self.duplicates, record.id, pos)
        self.size = len(recs)
        self.rows = recs

    def _add_texts(self, recs: Sequence[Record], lo: int, hi: int) -> None:
        """Append positions ``lo…hi-1`` (the records' tokens) to the postings, tf and length tables.

        Only tokenizing is per token in Python: tokens become numbers in C (`vocab`), numpy
        sorts them into (token, position) order and counts repeats, and each posting list grows by
        its whole run at once. A list's positions are appended before its tf: a reader zips the
        two, cut at its own n.
        """
        postings, tfs = self.postings, self.tf
        if hi - lo <= _FEW:  # a save or two: numpy's set-up would cost more than the records
            for pos in range(lo, hi):
                tokens, weak = _tokenize(_indexed_text(recs[pos]))
                self.length.append(max(1, len(tokens) - weak))
                for word, tf in Counter(tokens).items():
                    plist = postings.get(word)
                    if plist is None:
                        plist = postings[word] = array("I")
                    plist.append(pos)
                    counts_of = tfs.get(word)
                    if counts_of is None and tf > 1:
                        counts_of = tfs[word] = array("B", b"\x01" * (len(plist) - 1))
                    if counts_of is not None:
                        counts_of.append(min(tf, 255))
            return
        np = _numpy()
        vocab: defaultdict[str, int] = defaultdict()
        vocab.default_factory = vocab.__len__  # a new token gets the next number
        number = vocab.__getitem__
        ids = array("I")
        sizes = array("I")
        length = self.length
        for record in islice(recs, lo, hi):
            tokens, weak = _tokenize(_indexed_text(record))
            ids.extend(map(number, tokens))
            sizes.append(len(tokens))
            length.append(max(1, len(tokens) - weak))
        span = hi - lo
        pairs = np.frombuffer(ids, dtype=np.uint32).astype(np.int64) * span  # token · span + record
        pairs += np.repeat(np.arange(span), np.frombuffer(sizes, dtype=np.uint32))
        pairs.sort()
        new = np.ones(len(pairs), dtype=bool)  # the first of each run of one (token, record) pair
        new[1:] = pairs[1:] != pairs[:-1]
        at = np.flatnonzero(new)
        tf = np.minimum(np.diff(at, append=len(pairs)), 255).astype(np.uint8)
        token, pos = np.divmod(pairs[at], span)
        positions = memoryview((pos + lo).astype(np.uint32).tobytes())
        starts = np.searchsorted(token, np.arange(len(vocab))).tolist()  # where token i's run starts
        bounds, counts = [*starts, len(token)], memoryview(tf.tobytes())
        repeated = set(token[tf > 1].tolist())
        for i, word in enumerate(vocab):
            a, b = bounds[i], bounds[i + 1]
            plist = postings.get(word)
            if plist is None:
                plist = postings[word] = array("I")
            plist.frombytes(positions[4 * a : 4 * b])
            counts_of = tfs.get(word)
            if counts_of is None and i in repeated:
                counts_of = tfs[word] = array("B", b"\x01" * (len(plist) - (b - a)))
            if counts_of is not None:
                counts_of.frombytes(counts[a:b])

    def ids(self, recs: Sequence[Record]) -> dict[str, int]:
        """`first`, built now if it was not (`recs`: the records the tables cover)."""
        first = self.first
        if first is None:
            with self.lock:
                first = self.first
                if first is None:
                    first = {}
                    for pos, record in enumerate(islice(recs, min(self.size, len(recs)))):
                        _note_id(first, self.duplicates, record.id, pos)
                    self.first = first
        return first

    def copied(self, n: int) -> _Tables:
        """Copies of these tables cut to the first `n` records (a second successor of one version)."""
        out = _Tables()
        for token, plist in self.postings.items():
            k = _visible(plist, n)
            if k:
                out.postings[token] = plist[:k]
                counts = self.tf.get(token)
                if counts is not None:
                    out.tf[token] = counts[:k]
        out.length = self.length[:n]
        out.size = n
        return out


#: Record times are clamped to this in the int64 columns (another writer's odd numbers): the
#: comparisons with real times stay exact; two such odd times rank as equally recent.
_TIME_LIMIT = 1 << 62


def _numpy() -> Any:
    """numpy, imported by the first index build (~100 ms): a process that never searches never loads it."""
    import numpy

    return numpy


def _clamped(value: int) -> int:
    return value if -_TIME_LIMIT < value < _TIME_LIMIT else (_TIME_LIMIT if value > 0 else -_TIME_LIMIT)


class _Columns:
    """The per-record tables of one `_Tables` as numpy arrays, for the search.

    `arrays` is (length, factor, recency, expiry), each at least `filled` long: length in tokens
    (BM25's dl), importance factor, ``max(updated, created)`` and expiry (`_TIME_LIMIT` when
    none; times clamped to it). Only the records appended since the last fill are converted
    (amortised O(change): capacity doubles). A reader takes `arrays` once and reads only
    positions below its own n; a fill writes past `filled` or into new arrays it publishes
    whole, so a reader's view stays valid. Filled under the tables' lock.
    """

    __slots__ = ("arrays", "filled")

    def __init__(self, np: Any) -> None:
        self.filled = 0
        self.arrays: tuple[Any, Any, Any, Any] = (
            np.zeros(0, np.uintc),
            np.zeros(0, np.float64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
        )

    def fill(self, np: Any, tables: _Tables, recs: Sequence[Record], n: int) -> None:
        lo = self.filled
        if n <= lo:
            return
        arrays = self.arrays
        if n > len(arrays[0]):
            capacity = max(n, 2 * len(arrays[0]), 1024)
            grown = tuple(np.zeros(capacity, a.dtype) for a in arrays)
            for old, new in zip(arrays, grown, strict=True):
                new[:lo] = old[:lo]
            arrays = grown  # type: ignore[assignment]
        length, factor, recency, expiry = arrays
        # Copies of the array slices, never views of the live arrays (a view would stop them growing).
        length[lo:n] = np.frombuffer(tables.length[lo:n], dtype=np.uintc)
        rows = recs[lo:n]
        factor[lo:n] = np.fromiter((importance_factor(r.importance) for r in rows), dtype=np.float64, count=n - lo)
        # From generators: lists of n int objects left ~4 MB of freed-but-kept memory at 100k.
        recency[lo:n] = np.fromiter(
            (_clamped(max(r.updated_at, r.created_at)) for r in rows), dtype=np.int64, count=n - lo
        )
        expiry[lo:n] = np.fromiter(
            (_TIME_LIMIT if r.expired_at is None else _clamped(r.expired_at) for r in rows),
            dtype=np.int64,
            count=n - lo,
        )
        self.arrays = arrays
        self.filled = n


def _note_id(first: dict[str, int], duplicates: dict[str, list[int]], rid: str, pos: int) -> None:
    found = first.setdefault(rid, pos)
    if found != pos:  # another writer may have left the same id twice; keep both findable
        duplicates.setdefault(rid, [found]).append(pos)


def _visible(plist: array[int], n: int) -> int:
    """How many positions of the ascending `plist` are below `n` (a view's part of the list)."""
    if not plist or plist[-1] < n:
        return len(plist)
    return bisect_left(plist, n)


def _starts_with(recs: Sequence[Record], prefix: Sequence[Record]) -> bool:
    """Whether `recs` begins with exactly the records of `prefix` (the same objects: an append)."""
    starts = getattr(recs, "starts_with", None)
    if starts is not None:
        return bool(starts(prefix))  # the store's shared rows: O(1) for a longer view of one list
    n = len(prefix)
    return n <= len(recs) and tuple(recs[:n]) == tuple(prefix)


def _one_line(recs: Sequence[Record], rows: Sequence[Record]) -> bool:
    """Whether `recs` and `rows` hold the same records as far as both go (one is a prefix of the
    other): O(1) for two views of the store's shared rows."""
    return _starts_with(recs, rows) if len(rows) <= len(recs) else _starts_with(rows, recs)


def _same_texts(old: Sequence[Record], recs: Sequence[Record]) -> bool:
    """Whether every record of `old` has the same content and tags at its position in `recs`."""
    if len(recs) < len(old):
        return False
    for before, after in zip(old, recs, strict=False):
        if before is after or before == after:  # the same line (records compare by their bytes)
            continue
        if before.content != after.content or before.tags != after.tags:
            return False
    return True


class LexicalIndex:
    """Inverted index of one scope's records: token → positions in `records`, plus per-record data.

    Built once per snapshot (`index_for`); a search then touches only the records that share a
    token with the query. Posting lists are arrays of positions (4 bytes a posting). Term
    frequencies are kept only for tokens some record repeats (a byte per posting, parallel to
    its list; every other posting has tf 1), record lengths in an array, and their sum as a
    running total. Records are indexed whether expired or not, since expiry depends on the time
    of the search. The tables are shared with the indexes of earlier and later versions of the
    same file (`_Tables`): this index sees their first ``len(records)`` records.
    """

    __slots__ = ("__weakref__", "_n", "_tables", "_total_length", "records", "source")

    def __init__(self, records: Sequence[Record], tables: _Tables, source: object, total_length: int) -> None:
        self.records = records
        #: The sequence the index was built from; `index_for` checks it is still the snapshot's.
        self.source = source
        self._tables = tables
        self._n = len(records)
        self._total_length = total_length

    @classmethod
    def build(cls, records: Sequence[Record], previous: LexicalIndex | None = None) -> LexicalIndex:
        """Index the content and tags of `records` (each distinct token once per record, with its tf).

        With `previous` (the index of an earlier version of the same scope file): when its
        records are the first ones of `records` (an append: the very same objects), the shared
        tables grow by the new records in place, O(new records); when they only changed in
        place without changing any text (a touch, a supersede), the postings are reused and only
        the per-record tables are computed again. Tokenizing is most of the cost of a build.
        Anything else (a record edited, removed or moved) is a full build.
        """
        n = len(records)
        if previous is not None:
            old = previous.records
            m = previous._n
            if n >= m and _starts_with(records, old):
                if n == m:
                    return cls(records, previous._tables, records, previous._total_length)
                tables = previous._tables
                with tables.lock:
                    if not tables.sealed and tables.size >= m and _one_line(records, tables.rows):
                        # Newest so far, or another successor of `previous` on this very line grew
                        # them first (several saves between two searches, each version seeded
                        # with `previous`): go on from where they are, never copy them.
                        if tables.size < n:
                            tables.grow(records, tables.size)
                        return cls(records, tables, records, previous._total_length + sum(tables.length[m:n]))
                with tables.lock:  # a successor with other records grew them first
                    tables = tables.copied(m)
                tables.grow(records, m)
                return cls(records, tables, records, previous._total_length + sum(tables.length[m:n]))
            if _same_texts(old, records):
                shared = previous._tables
                with shared.lock:
                    if shared.sealed or shared.size != m:
                        shared = shared.copied(m)
                    else:
                        shared.sealed = True  # this index takes the text tables over
                    tables = _Tables(shared.postings, shared.tf, shared.length, shared.lock)
                with tables.lock:
                    tables.grow(records[:m], 0, texts=False)
                    tables.grow(records, m)
                return cls(records, tables, records, sum(tables.length[:n]))
        tables = _Tables()
        tables.grow(records, 0)
        return cls(records, tables, records, sum(tables.length))

    def __len__(self) -> int:
        return self._n

    def df(self, token: str) -> int:
        """How many records of this scope contain `token`."""
        plist = self._tables.postings.get(token)
        return 0 if plist is None else _visible(plist, self._n)

    @property
    def average_length(self) -> float:
        """BM25's ``avgdl``, from the running total: nothing is recomputed when records are appended."""
        return self._total_length / self._n if self._n else 1.0

    def positions_of(self, record_id: str) -> list[int]:
        """Positions of the records with this id (normally zero or one)."""
        tables = self._tables
        first = tables.ids(self.records)
        n = self._n
        dupes = tables.duplicates.get(record_id)
        if dupes is not None:
            return [pos for pos in list(dupes) if pos < n]
        pos = first.get(record_id)
        return [] if pos is None or pos >= n else [pos]

    def scores(self, tokens: Collection[str], *, threshold: float) -> dict[int, float]:
        """Lexical hits: position → strength (BM25 on a 0–1 scale, see the module docstring).

        Whether a record is a hit is decided by the IDF-weighted share of `tokens` (distinct) it
        contains: one sharing at least one strong token is a hit at ``share ≥ threshold``; one
        sharing only weak tokens (single CJK characters) and stop words at
        ``share ≥ max(threshold, 0.25)``; one sharing only stop words (`STOP_WORDS`) never is,
        nor one sharing only stop words and tokens `common` to the scope. (`rank` uses
        `_score_arrays`, which this reads back as a dict.)
        """
        np = _numpy()
        at, strength = self._score_arrays(np, self._columns(np), tokens, threshold=threshold)
        return dict(zip(at.tolist(), strength.tolist(), strict=True))

    def near(self, mine: frozenset[str], now: int, threshold: float = NEAR_JACCARD) -> list[tuple[int, float]]:
        """(position, Jaccard) of the live records whose `near_tokens` are at least `threshold`
        similar to the token set `mine`, most similar first.

        Such a record lacks at most ``slack = n − ⌈threshold·n⌉`` of `mine`'s n tokens, so of any
        q of them it holds at least ``q − slack`` (with q = slack + 1, the all-pairs-similarity
        prefix bound), and it has at least ``threshold·n`` tokens. The rarest tokens are counted
        in C, as many as `NEAR_POSTINGS` postings allow (at least the prefix); only records that
        pass both bounds are candidates, the `NEAR_CANDIDATES` holding most of them are checked
        against the other tokens, and only those left are tokenized. The cost is the postings of
        a few rare tokens, not a ranked search of the whole text.
        """
        if not mine:
            return []
        np = _numpy()
        n = self._n
        lists = sorted(
            ((p, k) for t in mine if (p := self._tables.postings.get(t)) is not None and (k := _visible(p, n))),
            key=lambda pair: pair[1],
        )
        # A token of `mine` no record has is one every record lacks.
        slack = len(mine) - math.ceil(threshold * len(mine)) - (len(mine) - len(lists))
        if slack < 0:
            return []
        q = min(slack + 1, len(lists))
        budget = sum(k for _p, k in lists[:q])
        while q < len(lists) and budget + lists[q][1] <= NEAR_POSTINGS:
            budget += lists[q][1]
            q += 1
        # Slices are copies: a view would stop a writer appending to the live posting list.
        held = np.bincount(np.frombuffer(b"".join(p[:k] for p, k in lists[:q]), dtype=np.uint32), minlength=n)
        length, _factor, _recency, expiry = self._columns(np).arrays
        enough = threshold * len(mine)
        keep = (held >= q - slack) & (length[:n] >= enough) & (expiry[:n] >= now)
        at = np.flatnonzero(keep)
        if len(at) > NEAR_CANDIDATES:
            at = at[np.argpartition(-held[at], NEAR_CANDIDATES)[:NEAR_CANDIDATES]]
        rest = [p for p, _k in lists[q:]]
        found = []
        for pos, count in zip(at.tolist(), held[at].tolist(), strict=True):
            # How many of `mine` the record holds bounds the similarity from above: most
            # candidates fail that (rarest lists first) without being tokenized.
            spare = count + len(rest) - enough  # lists it may still be missing from
            for p in rest:
                i = bisect_left(p, pos)
                if (i == len(p) or p[i] != pos) and (spare := spare - 1) < 0:
                    break
            if spare < 0:
                continue
            similarity = jaccard(mine, near_tokens(self.records[pos].content))
            if similarity >= threshold:
                found.append((pos, similarity))
        found.sort(key=lambda pair: -pair[1])
        return found

    def _columns(self, np: Any) -> _Columns:
        """The per-record columns, filled up to this index's records."""
        tables = self._tables
        n = self._n
        cols = tables.columns
        if cols is None or cols.filled < n:
            with tables.lock:
                cols = tables.columns
                if cols is None:
                    cols = tables.columns = _Columns(np)
                cols.fill(np, tables, self.records, n)
        return cols

    def _score_arrays(self, np: Any, cols: _Columns, tokens: Collection[str], *, threshold: float) -> tuple[Any, Any]:
        """The lexical hits (see `scores`) as (positions ascending, strengths).

        Candidates come only from the posting lists of *essential* tokens (MaxScore pruning): the
        *skippable* tokens are a set no record can pass the threshold with alone, so they only top
        up records already found, by binary search. A query word that is in every record (``item``
        of ``item_123``, ``的``) then costs a few lookups, not a walk over the whole scope. The
        result is the same as scoring every record. Each record's sums are accumulated token by
        token in a fixed order (`np.bincount` adds in input order). Cost: O(postings of the
        query's tokens) in C.
        """
        n = self._n
        if n == 0 or not tokens:
            return np.zeros(0, np.intp), np.zeros(0, np.float64)
        tables = self._tables
        postings = tables.postings
        tfs = tables.tf
        length = cols.arrays[0]
        dfs = {token: self.df(token) for token in set(tokens)}
        weights = {token: idf(n, df) for token, df in dfs.items()}
        total = sum(weights.values())
        present = [t for t in weights if dfs[t]]
        weak_need = max(threshold, WEAK_ONLY_THRESHOLD)
        common = self.common(present)
        skip = self._skippable(present, weights, total, threshold, weak_need, common, dfs)
        k_base = BM25_K1 * (1.0 - BM25_B)
        k_per_token = BM25_K1 * BM25_B / self.average_length
        k1_plus_1 = BM25_K1 + 1.0
        avg = self.average_length
        one_base = 1.0 + k_base

        parts: list[Any] = []  # positions, token by token (essential ones first, then the skippable)
        part_weights: list[float] = []
        extra_at: list[Any] = []  # positions whose BM25 differs from the share, and by how much
        extra_by: list[Any] = []
        strong_at: list[Any] = []
        weak_at: list[Any] = []

        def note(token: str, at: Any, weight: float, tf: Any, dl: Any) -> None:
            """Record token's postings `at` (with their tf, None when all 1, and lengths)."""
            if tf is None:
                longer = dl > avg
                if longer.any():
                    d = dl[longer].astype(np.float64)
                    extra_at.append(at[longer])
                    extra_by.append(weight * (k1_plus_1 / (one_base + k_per_token * d) - 1.0))
            else:
                counted = (tf > 1) | (dl > avg)
                if counted.any():
                    t = tf[counted].astype(np.float64)
                    d = np.maximum(dl[counted].astype(np.float64), avg)
                    extra_at.append(at[counted])
                    extra_by.append(weight * (t * k1_plus_1 / (t + k_base + k_per_token * d) - 1.0))
            parts.append(at)
            part_weights.append(weight)
            if is_weak_token(token):
                weak_at.append(at)
            elif token not in STOP_WORDS and token not in common:
                strong_at.append(at)

        for token in present:
            if token in skip:
                continue
            k = dfs[token]
            # Copies of this index's part of the lists (a view would stop another thread growing them).
            at = np.frombuffer(postings[token][:k], dtype=np.uintc)
            counts = tfs.get(token)
            tf = None if counts is None else np.frombuffer(counts[:k], dtype=np.uint8)
            note(token, at, weights[token], tf, length[at])
        if not parts:
            return np.zeros(0, np.intp), np.zeros(0, np.float64)
        found = np.concatenate(parts) if len(parts) > 1 else parts[0]
        # Few postings: sums over the sorted candidates (positions mapped by binary search); many:
        # sums over every position, which costs a pass over n in C but no search per posting.
        dense = len(found) * 8 >= n
        if dense:
            seen = np.zeros(n, dtype=bool)
            seen[found] = True
            candidates = np.flatnonzero(seen)
        else:
            candidates = np.unique(found)
        for token in skip:  # only tops up the records found above
            k = dfs[token]
            plist = np.frombuffer(postings[token][:k], dtype=np.uintc)
            if dense:  # which postings are candidates: a pass over the list, not a search per candidate
                where = np.flatnonzero(seen[plist])
            else:
                where = np.searchsorted(plist, candidates)
                inside = where < k
                where = where[inside]
                where = where[plist[where] == candidates[inside]]
            at = plist[where]
            counts = tfs.get(token)
            tf = None if counts is None else np.frombuffer(counts[:k], dtype=np.uint8)[where]
            note(token, at, weights[token], np.ones(len(at), np.uint8) if tf is None else tf, length[at])

        m = n if dense else len(candidates)

        def slots(at: list[Any]) -> Any:
            every = np.concatenate(at)
            return every if dense else np.searchsorted(candidates, every)

        sums = np.bincount(
            slots(parts), weights=np.repeat(np.array(part_weights), [len(a) for a in parts]), minlength=m
        )
        extra = np.zeros(m)
        if extra_at:
            extra = np.bincount(slots(extra_at), weights=np.concatenate(extra_by), minlength=m)
        strong = np.zeros(m, dtype=bool)
        if strong_at:
            strong[slots(strong_at)] = True
        weak = np.zeros(m, dtype=bool)
        if weak_at:
            weak[slots(weak_at)] = True
        if dense:
            sums, extra, strong, weak = sums[candidates], extra[candidates], strong[candidates], weak[candidates]
        need = np.where(strong, threshold, np.where(weak, weak_need, np.inf))
        hit = sums / total + _EPSILON >= need
        strength = np.minimum(1.0, (sums[hit] + extra[hit]) / total)
        return candidates[hit].astype(np.intp), strength

    def common(self, present: Collection[str]) -> frozenset[str]:
        """The query tokens that are too common here to carry a hit alone, when the query has rarer ones.

        A strong token in more than `COMMON_SHARE` of a scope of at least `COMMON_MIN_RECORDS`
        records — a speaker's name in their own conversation, a project's name in its scope — is
        common. If the query also has a strong token the scope holds that is not common, a
        record must share one of those: the common ones, like stop words, only add to its share.
        A query of nothing but common words keeps them (a search for the name alone works).
        """
        n = self._n
        if n < COMMON_MIN_RECORDS:
            return frozenset()
        strong = [t for t in present if t not in STOP_WORDS and not is_weak_token(t)]
        common = frozenset(t for t in strong if self.df(t) > COMMON_SHARE * (n + IDF_PRIOR_RECORDS))
        return common if len(common) < len(strong) else frozenset()

    def _skippable(
        self,
        present: list[str],
        weights: dict[str, float],
        total: float,
        threshold: float,
        weak_need: float,
        common: frozenset[str],
        dfs: Mapping[str, int],
    ) -> frozenset[str]:
        """Query tokens that cannot make a hit on their own, so need not produce candidates.

        Three safe choices, and the one with more postings wins: the lightest tokens whose weights
        together stay below the threshold; all single CJK characters when together they stay
        below the weak-only bar (a record having only those is a weak-only match that fails); or
        the stop words and common tokens (a record having only those is never a hit).
        """
        margin = 2 * _EPSILON  # stay clear of the threshold comparison's own tolerance
        lightest: list[str] = []
        budget = (threshold - margin) * total
        cumulative = 0.0
        for token in sorted(present, key=weights.__getitem__):
            if cumulative + weights[token] >= budget:
                break
            cumulative += weights[token]
            lightest.append(token)
        choices = [lightest, [t for t in present if t in STOP_WORDS or t in common]]
        weak = [t for t in present if is_weak_token(t)]
        if weak and sum(weights[t] for t in weak) < (weak_need - margin) * total:
            choices.append(weak)
        return frozenset(max(choices, key=lambda tokens: sum(dfs[t] for t in tokens)))


#: Only this much of a record's content is indexed (its tags always are). A save accepts 20,000
#: characters by default, so what we write is indexed whole; a 50 MB record written by another
#: program costs what a 20,000-character one does, stays intact on disk and is found by its start.
INDEX_CHARS = 20_000


def _indexed_text(record: Record) -> str:
    """The text of `record` the lexical index tokenizes (its content, cut to `INDEX_CHARS`, and tags)."""
    tags = record.tags
    content = record.content
    if len(content) > INDEX_CHARS:
        content = content[:INDEX_CHARS]
    # A newline keeps a tag from gluing onto the content's last word or CJK run.
    return content + "\n" + "\n".join(tags) if tags else content


class SnapshotLike(Protocol):
    """What scoring needs of a store snapshot: its scope, its records and a per-version cache."""

    @property
    def scope(self) -> str: ...

    @property
    def records(self) -> Sequence[Record]: ...

    @property
    def cache(self) -> MutableMapping[str, Any]: ...


def index_for(snapshot: SnapshotLike) -> LexicalIndex:
    """The snapshot's lexical index, built on first use and kept in `snapshot.cache["lexical"]`
    (as long as the file version). A previous version's index under ``"lexical_previous"`` is
    extended (`LexicalIndex.build`) and dropped once used. Threads asking at once wait for one build.
    """
    cache = snapshot.cache
    cached = cache.get(CACHE_KEY)
    records = snapshot.records
    if isinstance(cached, LexicalIndex) and cached.source is records:
        return cached
    with cache.setdefault(BUILD_LOCK_KEY, threading.Lock()):
        cached = cache.get(CACHE_KEY)
        if isinstance(cached, LexicalIndex) and cached.source is records:
            return cached
        previous = cache.get(PREVIOUS_CACHE_KEY)
        index = LexicalIndex.build(records, previous if isinstance(previous, LexicalIndex) else None)
        # The columns too, so a build in the background (the warm-up, another writer's append)
        # leaves the search less to do.
        index._columns(_numpy())
        cache[CACHE_KEY] = index
        cache.pop(PREVIOUS_CACHE_KEY, None)  # holding it would keep the old version's index alive
    return index


def near(snapshot: SnapshotLike, text: str, now: int, threshold: float = NEAR_JACCARD) -> list[tuple[Record, float]]:
    """The live records of `snapshot` whose texts are near-identical to `text` (`LexicalIndex.near`),
    most similar first.

    A save asks this for its own new version, which no search has indexed yet: when an earlier
    version's index (the one `index_for` would extend) covers all but the last `NEAR_UNINDEXED`
    records, that index answers for its records and the few appended since are compared one by one.
    Indexing the new version stays the next search's job (one extension for many saves, not one
    per save). A save never waits for more than `NEAR_BUILD` records to be indexed: on a big scope
    nobody has indexed yet (serve's warm-up is at it, holding the tables a seed would need) it
    compares only the last `NEAR_UNINDEXED` records.
    """
    records = snapshot.records
    index: LexicalIndex | None = snapshot.cache.get(CACHE_KEY)
    rest: Sequence[Record] = ()
    if not (isinstance(index, LexicalIndex) and index.source is records):
        seed = snapshot.cache.get(PREVIOUS_CACHE_KEY)
        if not (isinstance(seed, LexicalIndex) and _starts_with(records, seed.records)):
            seed = None
        unindexed = len(records) - (len(seed) if seed is not None else 0)
        if seed is not None and unindexed <= NEAR_UNINDEXED:
            index, rest = seed, records[len(seed) :]
        elif unindexed <= NEAR_BUILD:
            index = index_for(snapshot)
        else:
            index, rest = None, records[-NEAR_UNINDEXED:]
    mine = near_tokens(text)
    found = [] if index is None else [(index.records[p], sim) for p, sim in index.near(mine, now, threshold)]
    for record in rest:
        if not record.is_expired(now) and (similarity := jaccard(mine, near_tokens(record.content))) >= threshold:
            found.append((record, similarity))
    found.sort(key=lambda pair: -pair[1])
    return found


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: `score` is the final hybrid score (4 decimals) that orders results.

    `lexical` is the lexical strength that counted (0.0 when the record was not a lexical hit),
    `cosine` the vector channel's score, ``0.5 + 0.5·P(relevant)`` (None when the record was no
    vector candidate).
    """

    record: Record
    scope: str
    score: float
    lexical: float
    cosine: float | None


def fuse(lexical: float, vector: float | None) -> float:
    """The hybrid base score: ``1 − (1 − lexical)·(1 − (vector − 0.5)/0.5)``, two independent chances.

    Both channels arrive as a chance that the record answers the query. The lexical strength
    reads as one as it is: on both evaluation sets a hit of strength s was relevant about s of
    the time (0.1 at 0.15, 0.16–0.17 at 0.25, 0.24 at 0.35, 0.5 at 0.5), and an exact match is 1.
    The vector score is ``0.5 + 0.5·P(relevant)`` from the query's own background
    (`search.calibration`). So a record both channels found beats one either found alone; a
    vector neighbour that barely stands out from the query's background (P near 0) adds almost
    nothing and never outranks a strong lexical hit; the vector channel's confident best
    candidate stays above a pile of weak lexical hits that only share a name.
    """
    lexical = max(0.0, min(1.0, lexical))
    if vector is None:
        return lexical
    chance = max(0.0, min(1.0, (vector - MIN_COSINE) / (1.0 - MIN_COSINE)))
    return 1.0 - (1.0 - lexical) * (1.0 - chance)


def rank(
    snapshots: Iterable[SnapshotLike],
    query: str,
    *,
    top_k: int,
    now: int,
    vector_scores: Mapping[str, float] | None = None,
) -> list[Hit]:
    """Hybrid search over snapshots: ``round(fuse(lexical, vector) · importance factor, 4)``.

    `vector_scores` maps record id → vector score for the vector candidates (any scope), on the
    scale `search.calibration` gives them: 0.5 + 0.5·P(relevant); those below 0.5 are ignored.
    Expired records never appear; an id found in several snapshots appears once, with its best
    entry. Order: score desc → scope rank (session,
    project, custom, global) → more important → more recently saved or updated → later in its
    file. Never the id: a uuid is no order anyone would choose. `accessCount` plays no part (a
    memory recalled often must not win the next question for that reason: generic memories
    would climb on every search).
    """
    if top_k <= 0:
        return []
    tokens = query_tokens(query)
    vectors = {rid: c for rid, c in (vector_scores or {}).items() if c >= MIN_COSINE}
    indexes = [(snapshot.scope, index_for(snapshot)) for snapshot in snapshots]
    return _ranked(_numpy(), indexes, tokens, top_k, now, vectors)


def _ranked(
    np: Any,
    indexes: Sequence[tuple[str, LexicalIndex]],
    tokens: frozenset[str],
    top_k: int,
    now: int,
    vectors: Mapping[str, float],
) -> list[Hit]:
    """`rank` over built indexes.

    Scores, importance factors and expiry are array operations over the hits; only the hits
    that can still make the top get their score rounded in Python (`round`: numpy's rounding
    differs in the last place) and are sorted by `rank`'s keys with `np.lexsort`. A common word
    can match thousands of records: sort keys and Hit objects are made only for the contenders.
    """
    channels: list[tuple[str, LexicalIndex, Any, Any, dict[int, float]]] = []
    raws, numbers, places, factors, recencies, ranks = [], [], [], [], [], []
    for number, (scope, index) in enumerate(indexes):
        cols = index._columns(np)
        _length, factor, recency, expiry = cols.arrays
        if tokens:
            at, lexical = index._score_arrays(np, cols, tokens, threshold=lexical_threshold(scope))
        else:
            at, lexical = np.zeros(0, np.intp), np.zeros(0, np.float64)
        cosines: dict[int, float] = {}
        for rid, similarity in vectors.items():
            for pos in index.positions_of(rid):
                cosines[pos] = similarity
        bases_at, bases = at, lexical
        if cosines:
            nearby = np.fromiter(cosines, dtype=np.intp, count=len(cosines))
            where = np.minimum(np.searchsorted(at, nearby), max(len(at) - 1, 0))
            shared = (at[where] == nearby) if len(at) else np.zeros(len(nearby), dtype=bool)
            fused = [
                fuse(float(lexical[i]) if both else 0.0, cosines[int(pos)])
                for pos, i, both in zip(nearby.tolist(), where.tolist(), shared.tolist(), strict=True)
            ]
            alone = np.ones(len(at), dtype=bool)
            alone[where[shared]] = False
            bases_at = np.concatenate([at[alone], nearby])
            bases = np.concatenate([lexical[alone], np.array(fused, dtype=np.float64)])
        live = expiry[bases_at] >= now
        if not live.all():
            bases_at, bases = bases_at[live], bases[live]
        channels.append((scope, index, at, lexical, cosines))
        raws.append(bases * factor[bases_at])  # ``base * factor``, before rounding
        numbers.append(np.full(len(bases_at), number, dtype=np.intp))
        places.append(bases_at)
        factors.append(factor[bases_at])
        recencies.append(recency[bases_at])
        ranks.append(np.full(len(bases_at), scope_rank(scope), dtype=np.int64))
    raw = np.concatenate(raws)
    if not len(raw):
        return []
    number_of, pos_of = np.concatenate(numbers), np.concatenate(places)
    factor_of, recency_of, rank_of = np.concatenate(factors), np.concatenate(recencies), np.concatenate(ranks)

    def rounded(values: Any) -> Any:
        distinct, back = np.unique(values, return_inverse=True)  # ties share one Python round
        return np.array([round(v, 4) for v in distinct.tolist()], dtype=np.float64)[back]

    def pick(chosen: Any) -> list[tuple[float, int, int]]:
        score = rounded(raw[chosen])
        number, pos = number_of[chosen], pos_of[chosen]
        order = np.lexsort((number, -pos, -recency_of[chosen], -factor_of[chosen], rank_of[chosen], -score))
        picked: list[tuple[float, int, int]] = []
        seen: set[str] = set()
        for i in order.tolist():
            c, p = int(number[i]), int(pos[i])
            rid = channels[c][1].records[p].id
            if rid not in seen:  # an id in several snapshots: its first (best) entry wins
                seen.add(rid)
                picked.append((float(score[i]), c, p))
                if len(picked) == top_k:
                    break
        return picked

    everything = np.arange(len(raw))
    if len(raw) > top_k:
        # The top_k-th largest rounded score is the rounded top_k-th largest score (rounding keeps
        # order); everything that rounds to it or above is a contender, a superset found first by
        # a margin wider than any rounding moves a value.
        kth = float(np.partition(raw, len(raw) - top_k)[len(raw) - top_k])
        near = np.flatnonzero(raw >= kth - 2e-4)
        cutoff = round(kth, 4)
        contenders = near[rounded(raw[near]) >= cutoff]
        picked = pick(contenders)
        if len(picked) < top_k:  # duplicates thinned the contenders below top_k: look at everything
            picked = pick(everything)
    else:
        picked = pick(everything)

    hits = []
    for score, number, pos in picked:
        scope, index, at, lexical, cosines = channels[number]
        i = int(np.searchsorted(at, pos))
        hits.append(
            Hit(
                record=index.records[pos],
                scope=scope,
                score=score,
                lexical=float(lexical[i]) if i < len(at) and at[i] == pos else 0.0,
                cosine=cosines.get(pos),
            )
        )
    return hits
