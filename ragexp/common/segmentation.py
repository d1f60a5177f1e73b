"""Chinese word segmentation: exactly ``jieba.lcut(text)``, without loading jieba's dictionary.

:func:`segment` returns the words ``jieba.lcut(text)`` returns (accurate mode, HMM on, jieba's
default dictionary) — the segmentation SPEC §2.5 keywords and RAGQuestEval's answer tokens use.

Why not call jieba: its first cut loads a prefix dictionary of ~500,000 entries (the 349,046 words
of its ``dict.txt`` and every prefix of one) — 0.5-1 s, a third of a demo run. Segmenting a sentence
reads only the entries for the fragments of that sentence, so here they are read from an on-disk
index when first needed and remembered (a dict in front of the index; after 100,000 distinct
fragments in a process the whole table is read at once, so a very large input pays about what
jieba's load costs, never much more):

- The index is an SQLite file built once from jieba's own data — its ``dict.txt`` read by jieba's
  own ``Tokenizer.gen_pfdict`` (so the counts and the total are jieba's) and the HMM tables of
  ``jieba.finalseg`` — in the user's cache directory: ``$XDG_CACHE_HOME/ragexp/`` (default
  ``~/.cache/ragexp/``), about 10 MB, named ``jieba-<key>.sqlite3``. The key covers this module's
  index format and the path, size and modification time of ``dict.txt``, jieba's ``__init__.py``
  (which holds its version) and its HMM tables: upgrading jieba gives a new key and a new build.
  The build (2-5 s, once) writes a temporary file in the same folder and renames it into place,
  so a process never opens half an index; two processes building at once each write their own
  file and the last rename wins (both hold the same rows).
- ``ragexp.evaluate(..., log=False)`` writes nothing in the working directory; this cache (under the
  user's cache directory) is the one file it may leave, as jieba itself leaves ``/tmp/jieba.cache``.
- When the index cannot be built or opened (a read-only home, no home, a jieba version this code was
  not checked against), :func:`segment` quietly uses jieba itself, with its usual dictionary load.
- It is jieba's dictionary as installed: words a program adds to jieba while it runs
  (``jieba.add_word``, ``jieba.load_userdict``, ``suggest_freq``) do not change ragexp's keywords.

The cut is jieba's algorithm on these lookups: split the text into jieba's "Han" blocks (CJK ideographs
U+4E00-U+9FD5, ASCII letters and digits, ``+#&._%-``; every other character is a word of its own,
``\r\n`` too); in a block, every dictionary word starting at each position (the DAG), the
most probable path through it by the words' log-frequencies (ties to the longer word), and runs of
single characters that are not a dictionary word given to the HMM (Viterbi over the B/M/E/S states).
Each comparison and each sum is made in jieba's order, so ties and floating-point rounding fall the
same way; tests/test_segmentation.py checks equality with ``jieba.lcut`` over every Chinese run in
the shared data, the seeds and the demo, and over adversarial texts.

    >>> segment("RAG是一种结合检索和生成的模型架构")
    ['RAG', '是', '一种', '结合', '检索', '和', '生成', '的', '模型', '架构']
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable
from math import log
from pathlib import Path

#: jieba versions whose algorithm this module reproduces (checked by tests/test_segmentation.py).
CHECKED_JIEBA_VERSIONS = frozenset({"0.42.1"})

_FORMAT = 1  # bump when the index's tables change
_MIN_FLOAT = -3.14e100  # jieba's "impossible" log-probability for a missing HMM entry
_STATES = "BMES"
_PREVIOUS = {"B": "ES", "M": "MB", "S": "SE", "E": "BM"}  # the states each state can follow

# jieba's default block pattern (cut, accurate mode), its white-space pattern, and the two patterns
# its HMM (finalseg) splits a buffer with
_BLOCK = re.compile("([\u4E00-\u9FD5a-zA-Z0-9+#&\\._%\\-]+)")
_SPACE = re.compile("(\r\n|\\s)")
_HMM_HAN = re.compile("([\u4E00-\u9FD5]+)")
_HMM_OTHER = re.compile("([a-zA-Z0-9]+(?:\\.\\d+)?%?)")

# distinct fragments looked up one at a time before the whole table is read instead (~1 s of queries,
# as long as reading it all; text that large would pay jieba's whole load anyway)
_READ_ALL_AFTER = 100_000


class IndexUnavailable(Exception):
    """The on-disk index cannot be used here (the caller falls back to jieba itself)."""


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/ragexp`` (default ``~/.cache/ragexp``): where the index is kept."""
    base = os.environ.get("XDG_CACHE_HOME") or ""
    return (Path(base) if os.path.isabs(base) else Path.home() / ".cache") / "ragexp"


def jieba_dir() -> Path:
    """The installed jieba package's folder, found without importing jieba."""
    from importlib.util import find_spec

    spec = find_spec("jieba")
    if spec is None or not spec.submodule_search_locations:
        raise IndexUnavailable("jieba is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _index_key(dictionary: Path, package: Path) -> str:
    import hashlib

    parts = [f"format {_FORMAT}", str(dictionary.resolve())]
    for path in (dictionary, package / "__init__.py", *(package / "finalseg" / f"prob_{t}.py"
                                                       for t in ("start", "trans", "emit"))):
        st = path.stat()
        parts.append(f"{path.name} {st.st_size} {st.st_mtime_ns}")
    return hashlib.sha1("\n".join(parts).encode("utf-8")).hexdigest()[:16]


def build_index(path: Path, dictionary: Path, key: str) -> None:
    """Write the index for ``dictionary`` to ``path``: a temporary file in its folder, renamed into place."""
    import logging
    import sqlite3
    import tempfile

    import jieba
    import jieba.finalseg as hmm

    if jieba.__version__ not in CHECKED_JIEBA_VERSIONS:
        raise IndexUnavailable(f"jieba {jieba.__version__} is not one this module was checked against")
    jieba.setLogLevel(logging.WARNING)
    with open(dictionary, "rb") as f:
        freq, total = jieba.Tokenizer.gen_pfdict(f)  # jieba's own reading: its counts, its total
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        con = sqlite3.connect(tmp)
        try:
            con.execute("PRAGMA journal_mode=OFF")
            con.execute("PRAGMA synchronous=OFF")
            con.execute("CREATE TABLE freq (word TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID")
            con.executemany("INSERT INTO freq VALUES (?, ?)", sorted(freq.items()))
            con.execute("CREATE TABLE emit (ch TEXT PRIMARY KEY, b REAL, m REAL, e REAL, s REAL) WITHOUT ROWID")
            chars = sorted(set().union(*(hmm.emit_P[y] for y in _STATES)))
            con.executemany("INSERT INTO emit VALUES (?, ?, ?, ?, ?)",
                            [(c, *(hmm.emit_P[y].get(c) for y in _STATES)) for c in chars])
            con.execute("CREATE TABLE hmm (name TEXT PRIMARY KEY, p REAL NOT NULL) WITHOUT ROWID")
            con.executemany("INSERT INTO hmm VALUES (?, ?)",
                            [(f"start {y}", p) for y, p in hmm.start_P.items()]
                            + [(f"trans {a}{b}", p) for a, row in hmm.trans_P.items() for b, p in row.items()])
            con.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
            con.executemany("INSERT INTO meta VALUES (?, ?)",
                            [("key", key), ("total", str(total)), ("jieba", jieba.__version__),
                             ("dictionary", str(dictionary))])
            con.commit()
        finally:
            con.close()
        with open(tmp, "rb") as f:  # on disk before it has its name: a crash leaves no torn index
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class Index:
    """Read-only lookups in a built index, each remembered: ``freq[word]`` and ``emit[char]``."""

    def __init__(self, path: Path, key: str):
        import sqlite3

        self.path, self.key = path, key
        self.built = False  # set by open_index when this process wrote the file
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._con = self._connect()
        try:
            meta = dict(self._con.execute("SELECT name, value FROM meta"))
            tables = dict(self._con.execute("SELECT name, p FROM hmm"))
        except sqlite3.DatabaseError as exc:
            self._con.close()
            raise IndexUnavailable(f"{path}: {exc}") from exc
        if meta.get("key") != key:
            self._con.close()
            raise IndexUnavailable(f"{path} was built for another dictionary or format")
        self.total = int(meta["total"])
        self.start = {y: tables[f"start {y}"] for y in _STATES}
        self.trans = {(a, b): tables.get(f"trans {a}{b}", _MIN_FLOAT) for a in _STATES for b in _STATES}
        #: jieba's FREQ[word]: a count (0 for a prefix that is not itself a word), None when absent
        self.freq: dict[str, int | None] = _Memo(self._count, self._all_counts)
        #: the HMM's emission log-probability of a character in each state (jieba's floor when it has none)
        self.emit: dict[str, dict[str, float]] = _Memo(self._emission)

    def _connect(self):
        import sqlite3
        from urllib.parse import quote

        # immutable: the file is never changed once renamed into place (a rebuild is a new file)
        uri = f"file:{quote(str(self.path))}?mode=ro&immutable=1"
        return sqlite3.connect(uri, uri=True, check_same_thread=False)

    def _rows(self, sql: str, *args: str) -> list[tuple]:
        with self._lock:
            if self._pid != os.getpid():  # a forked child does not share its parent's connection
                self._pid, self._con = os.getpid(), self._connect()
            return self._con.execute(sql, args).fetchall()

    def _count(self, word: str) -> int | None:
        rows = self._rows("SELECT n FROM freq WHERE word = ?", word)
        return rows[0][0] if rows else None

    def _all_counts(self) -> list[tuple[str, int]]:
        return self._rows("SELECT word, n FROM freq")

    def _emission(self, ch: str) -> dict[str, float]:
        rows = self._rows("SELECT b, m, e, s FROM emit WHERE ch = ?", ch) or [(None,) * 4]
        return {y: _MIN_FLOAT if v is None else v for y, v in zip(_STATES, rows[0])}


class _Memo(dict):
    """A dict that asks ``fetch`` for a key it does not hold yet and keeps the answer: a hit costs what a
    dict lookup costs (the segmenter makes hundreds of thousands), a miss one indexed query. After
    ``_READ_ALL_AFTER`` misses it takes every row from ``fetch_all`` at once, and a key still missing
    is then absent (None)."""

    def __init__(self, fetch: Callable[[str], object], fetch_all: Callable[[], Iterable[tuple]] | None = None):
        super().__init__()
        self._fetch, self._fetch_all = fetch, fetch_all
        self.complete = False
        self._misses = 0

    def __missing__(self, key: str):
        if self.complete:
            return None
        self._misses += 1
        if self._fetch_all is not None and self._misses > _READ_ALL_AFTER:
            self.update(self._fetch_all())
            self.complete = True
            return self.get(key)
        value = self[key] = self._fetch(key)
        return value


def open_index(dictionary: str | Path | None = None, cache: str | Path | None = None) -> Index:
    """The index of ``dictionary`` (default: jieba's ``dict.txt``) in ``cache`` (default :func:`cache_dir`),
    built first when it is missing, stale or unreadable. Raises :class:`IndexUnavailable` or ``OSError``
    when it can be neither opened nor built."""
    package = jieba_dir()
    dictionary = Path(dictionary) if dictionary is not None else package / "dict.txt"
    key = _index_key(dictionary, package)
    path = Path(cache if cache is not None else cache_dir()) / f"jieba-{key}.sqlite3"
    if path.is_file():
        try:
            return Index(path, key)
        except IndexUnavailable:
            pass  # half-copied, damaged or foreign: build it again
    build_index(path, dictionary, key)
    index = Index(path, key)
    index.built = True
    return index


class Segmenter:
    """``jieba.lcut`` (accurate mode, HMM on) over an :class:`Index`'s lookups."""

    def __init__(self, index: Index):
        self.index = index
        self._logtotal = log(index.total)

    def cut(self, text: str) -> list[str]:
        words: list[str] = []
        for block in _BLOCK.split(text):
            if not block:
                continue
            if _BLOCK.match(block):
                self._cut_block(block, words)
            else:
                for piece in _SPACE.split(block):
                    if _SPACE.match(piece):
                        words.append(piece)
                    else:
                        words.extend(piece)  # one word per character
        return words

    def _ends(self, block: str) -> list[list[int]]:
        """For each start k, the last index of every dictionary word block[k:i+1] (or just k)."""
        freq, n = self.index.freq, len(block)
        dag = []
        for k in range(n):
            ends = []
            i, count = k, freq[block[k]]
            while count is not None:  # block[k:i+1] is a word or the prefix of one
                if count:
                    ends.append(i)
                i += 1
                if i == n:
                    break
                count = freq[block[k:i + 1]]
            dag.append(ends or [k])
        return dag

    def _cut_block(self, block: str, words: list[str]) -> None:
        freq, n, logtotal = self.index.freq, len(block), self._logtotal
        dag = self._ends(block)
        # best[k] = (log-probability of the best path from k to the end, last index of its first word);
        # the tuple comparison takes the larger index on a tie, as jieba's does
        best: list[tuple[float, int]] = [(0, 0)] * (n + 1)
        for k in range(n - 1, -1, -1):
            best[k] = max((log(freq[block[k:x + 1]] or 1) - logtotal + best[x + 1][0], x) for x in dag[k])
        singles = ""  # consecutive one-character words, given to the HMM unless they form a known word
        k = 0
        while k < n:
            end = best[k][1] + 1
            if end - k == 1:
                singles += block[k]
            else:
                if singles:
                    self._flush(singles, words)
                    singles = ""
                words.append(block[k:end])
            k = end
        if singles:
            self._flush(singles, words)

    def _flush(self, singles: str, words: list[str]) -> None:
        if len(singles) == 1:
            words.append(singles)
        elif not self.index.freq[singles]:
            self._hmm(singles, words)
        else:
            words.extend(singles)

    def _hmm(self, text: str, words: list[str]) -> None:
        """jieba.finalseg.cut: Viterbi over the ideograph runs, the rest split into ASCII words."""
        for piece in _HMM_HAN.split(text):
            if _HMM_HAN.match(piece):
                words.extend(self._viterbi(piece))
            else:
                words.extend(x for x in _HMM_OTHER.split(piece) if x)

    def _viterbi(self, text: str) -> list[str]:
        start, trans, emit = self.index.start, self.index.trans, self.index.emit
        first = emit[text[0]]
        score = {y: start[y] + first[y] for y in _STATES}
        path = {y: y for y in _STATES}
        for ch in text[1:]:
            e = emit[ch]
            new_score, new_path = {}, {}
            for y in _STATES:
                p, before = max((score[y0] + trans[y0, y] + e[y], y0) for y0 in _PREVIOUS[y])
                new_score[y], new_path[y] = p, path[before] + y
            score, path = new_score, new_path
        states = path[max((score[y], y) for y in "ES")[1]]
        out, begin, done = [], 0, 0
        for i, state in enumerate(states):
            if state == "B":
                begin = i
            elif state == "E":
                out.append(text[begin:i + 1])
                done = i + 1
            elif state == "S":
                out.append(text[i])
                done = i + 1
        if done < len(text):
            out.append(text[done:])
        return out


def _stock_jieba() -> Callable[[str], list[str]]:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba.lcut


_segment: Callable[[str], list[str]] | None = None
_backend = ""
_start_lock = threading.Lock()


def _start() -> Callable[[str], list[str]]:
    global _segment, _backend
    with _start_lock:
        if _segment is None:
            try:
                _segment, _backend = Segmenter(open_index()).cut, "index"
            except Exception:  # no usable cache (read-only, no home, unchecked jieba): jieba itself
                _segment, _backend = _stock_jieba(), "jieba"
    return _segment


def segment(text: str) -> list[str]:
    """``jieba.lcut(text)``: the words of ``text``, read from the on-disk index (jieba itself without one)."""
    return (_segment or _start())(text)


def backend() -> str:
    """The segmenter :func:`segment` uses in this process: ``"index"``, ``"jieba"`` (``""`` before a first call)."""
    return _backend
