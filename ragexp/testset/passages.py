"""Passages to ask about: chunks with offsets, seeded stratified sampling, and two-passage pairs.

The sampling rule (docs/testset.md, "How passages are chosen"): passages of at least ``min_words``
words are eligible (shorter ones are counted as ``too_short``); documents are visited in an order
shuffled by the seed, one passage drawn from each in turn (round robin), so ``n`` questions spread
over ``min(n, documents)`` documents before any document gives a second passage.

The pairing rule for a multi-passage question: the partner of passage *p* is the passage BM25 ranks
first for *p*'s own text among the eligible passages of *other* documents (a single-document corpus:
of other chunks); no partner sharing a term with *p* means no multi-passage question from *p*.

    >>> from ragexp.pipeline.chunking import Chunker
    >>> ps = chunk_passages({"a": "one two three four", "b": "five six"}, Chunker(size=2))
    >>> [(p.id, p.doc_id, p.start, p.end, p.text) for p in ps]
    [('a#0', 'a', 0, 7, 'one two'), ('a#1', 'a', 8, 18, 'three four'), ('b#0', 'b', 0, 8, 'five six')]
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

from ragexp.pipeline.chunking import Chunk, Chunker


@dataclass(frozen=True, slots=True)
class Passage:
    """One chunk of a document: its chunk id (``<doc id>#<n>``), document id, character offsets and text."""

    id: str
    doc_id: str
    start: int
    end: int
    text: str


#: The longest passage asked about, in characters (about 3,000 English words): a longer chunk (a whole
#: 500 MB document under ``chunker=none``) is cut into consecutive pieces at white space, so a prompt and
#: what is held per passage stay bounded (docs/testset.md, "How passages are chosen").
MAX_PASSAGE_CHARS = 20_000


def bounded(text: str, a: int, b: int, limit: int = MAX_PASSAGE_CHARS) -> list[tuple[int, int]]:
    """``(a, b)`` as consecutive spans of at most ``limit`` characters, each ending at white space where
    there is some (else cut at the limit), white space between them left out.

    >>> bounded("aaa bbb ccc", 0, 11, limit=7)
    [(0, 7), (8, 11)]
    >>> bounded("abcdefghij", 0, 10, limit=4)
    [(0, 4), (4, 8), (8, 10)]
    """
    out: list[tuple[int, int]] = []
    while b - a > limit:
        cut = max(text.rfind(" ", a + 1, a + limit + 1), text.rfind("\n", a + 1, a + limit + 1))
        end = cut if cut > a else a + limit
        out.append((a, end))
        a = end
        while a < b and text[a].isspace():
            a += 1
    if b > a:
        out.append((a, b))
    return out


def chunk_passages(docs: dict[str, str], chunker: Chunker, limit: int = MAX_PASSAGE_CHARS) -> list[Passage]:
    """Every chunk of every document, with the ids :meth:`Chunker.split` gives and the offsets of :meth:`Chunker.spans`;
    a chunk longer than ``limit`` characters is :func:`bounded` (its pieces numbered on, ``<doc id>#<n>``)."""
    out: list[Passage] = []
    for doc_id, text in docs.items():
        n = 0
        for span in chunker.spans(text):
            for a, b in bounded(text, *span, limit=limit):
                out.append(Passage(f"{doc_id}#{n}", doc_id, a, b, text[a:b]))
                n += 1
    return out


def eligible(passages: list[Passage], min_words: int) -> tuple[list[Passage], int]:
    """(passages of at least ``min_words`` words, how many were shorter)."""
    keep = [p for p in passages if len(p.text.split()) >= min_words]
    return keep, len(passages) - len(keep)


def too_few_line(n: int, pool: list[Passage], min_words: int,
                 count: Callable[[int], int] | None = None) -> str | None:
    """When the passages to ask about are fewer than the ``n`` questions asked for (each is asked about once): the
    sentence saying so, with the chunker setting that gives enough of them; None when there are enough.

    The setting is ``chunker=words`` windows of the size that cuts the eligible text into ``n`` passages, never
    under ``min_words``. ``count(size)``, when given, says how many passages of ``min_words``+ words that size
    really gives (a document's last window may fall short): then the size named is the largest that gives ``n``,
    and when even ``min_words`` does not, the line says to lower ``min_words`` or give more documents.

    >>> pool = [Passage(f"d{i}#0", f"d{i}", 0, 600, " ".join(["w"] * 120)) for i in range(10)]
    >>> too_few_line(30, pool, 30)
    'n=30, but the corpus gives 10 passages of 30+ words (each is asked about once): 20 questions will not be generated; cut the documents into more passages: chunker=words chunker.size=40 chunker.overlap=0 (docs/testset.md)'
    >>> too_few_line(10, pool, 30) is None
    True

    Ten documents of 50 words: 40-word windows would leave 10-word tails, too short to ask about:

    >>> pool = [Passage(f"d{i}#0", f"d{i}", 0, 300, " ".join(["w"] * 50)) for i in range(10)]
    >>> too_few_line(12, pool, 30, count=lambda size: 10 * (50 // size))
    'n=12, but the corpus gives 10 passages of 30+ words (each is asked about once): 2 questions will not be generated; no chunker.size gives 12 passages of 30+ words: lower min_words (and cut shorter passages: chunker=words chunker.size=<min_words>), or give more documents (docs/testset.md)'
    >>> too_few_line(12, pool, 20, count=lambda size: 10 * (50 // size))
    'n=12, but the corpus gives 10 passages of 20+ words (each is asked about once): 2 questions will not be generated; cut the documents into more passages: chunker=words chunker.size=25 chunker.overlap=0 (docs/testset.md)'
    """
    if len(pool) >= n:
        return None
    words = sum(len(p.text.split()) for p in pool)
    size = max(min_words, words // n)
    if count is not None and count(size) < n:  # the largest size from min_words up to it that gives n
        low, high = min_words, size - 1
        size = 0
        while low <= high:
            mid = (low + high) // 2
            if count(mid) >= n:
                size, low = mid, mid + 1
            else:
                high = mid - 1
    if size and size < words // len(pool):  # smaller windows than the passages are now: more of them
        fix = f"cut the documents into more passages: chunker=words chunker.size={size} chunker.overlap=0"
    else:  # the passages are already that short: only a lower bound or more text helps
        fix = (f"no chunker.size gives {n} passages of {min_words}+ words: lower min_words (and cut shorter passages: "
               f"chunker=words chunker.size=<min_words>), or give more documents")
    return (f"n={n}, but the corpus gives {len(pool)} passages of {min_words}+ words (each is asked about once): "
            f"{n - len(pool)} questions will not be generated; {fix} (docs/testset.md)")


def sample(passages: list[Passage], n: int, seed: int) -> list[Passage]:
    """Up to ``n`` distinct passages, round robin over documents in a seeded order (module docstring)."""
    rng = random.Random(seed)
    by_doc: dict[str, list[Passage]] = {}
    for p in passages:
        by_doc.setdefault(p.doc_id, []).append(p)
    order = list(by_doc)
    rng.shuffle(order)
    for doc in order:
        rng.shuffle(by_doc[doc])
    picked: list[Passage] = []
    while len(picked) < n and any(by_doc[d] for d in order):
        for doc in order:
            if by_doc[doc] and len(picked) < n:
                picked.append(by_doc[doc].pop())
    return picked


def kind_plan(n: int, shares: dict[str, float], seed: int) -> list[str]:
    """``n`` question kinds in the given shares (largest remainder), in a seeded order.

    >>> sorted(kind_plan(10, {"factoid": 0.5, "descriptive": 0.3, "multi": 0.2}, 0))
    ['descriptive', 'descriptive', 'descriptive', 'factoid', 'factoid', 'factoid', 'factoid', 'factoid', 'multi', 'multi']
    """
    total = sum(v for v in shares.values() if v > 0)
    exact = {k: n * v / total for k, v in shares.items() if v > 0}
    counts = {k: int(x) for k, x in exact.items()}
    for k in sorted(exact, key=lambda k: (-(exact[k] - counts[k]), k))[: n - sum(counts.values())]:
        counts[k] += 1
    plan = [k for k in exact for _ in range(counts[k])]
    random.Random(seed).shuffle(plan)
    return plan


class Neighbours:
    """BM25 over the eligible passages (ragexp's own retriever), for the pairing rule and the difficulty round trip."""

    def __init__(self, passages: list[Passage]):
        from ragexp.pipeline.retrievers import BM25Retriever

        self.passages = passages
        self.bm25 = BM25Retriever(top_k=10)
        self.bm25.prepare([Chunk(p.id, p.doc_id, p.text) for p in passages], {}, None)

    def partners(self, items: list[Passage], among: list[Passage], depth: int = 20) -> list[Passage | None]:
        """Each item's partner by the pairing rule (module docstring) among the passages ``among`` (the eligible
        ones), or None."""
        allowed = {p.id for p in among}
        single_doc = len({p.doc_id for p in among}) == 1
        hits = self.bm25.search_many([p.text for p in items], depth, [{} for _ in items])
        out: list[Passage | None] = []
        for p, found in zip(items, hits):
            partner = None
            for i, _score in found:
                q = self.passages[i]
                if q.id != p.id and q.id in allowed and (single_doc or q.doc_id != p.doc_id):
                    partner = q
                    break
            out.append(partner)
        return out

    def ranks(self, queries: list[str], gold: list[set[str]], depth: int = 100) -> list[int | None]:
        """The 1-based rank of the first gold passage BM25 returns for each query (None: not in the first ``depth``)."""
        hits = self.bm25.search_many(queries, depth, [{} for _ in queries])
        out: list[int | None] = []
        for found, g in zip(hits, gold):
            rank = next((r for r, (i, _s) in enumerate(found, start=1) if self.passages[i].id in g), None)
            out.append(rank)
        return out


def difficulty(rank: int | None) -> str:
    """``easy`` (BM25 ranks a gold passage first), ``medium`` (2–5), ``hard`` (lower, or not found).

    >>> [difficulty(r) for r in (1, 3, 9, None)]
    ['easy', 'medium', 'hard', 'hard']
    """
    if rank == 1:
        return "easy"
    return "medium" if rank is not None and rank <= 5 else "hard"


def as_dict(p: Passage) -> dict[str, Any]:
    return {"chunk_id": p.id, "doc_id": p.doc_id, "start": p.start, "end": p.end}
