"""ragexp's offline sentence splitter (rule-based, no model, no download) for the sentence matchers and
the ``sentence`` compressor. The rules: docs/metrics.md, "Matchers". Cached per text, so a passage
retrieved for many queries is split once.

    >>> split_sentences("Dr. Smith went to Washington. He arrived at 3.30 p.m. on Monday!  Was it late?")
    ('Dr. Smith went to Washington.', 'He arrived at 3.30 p.m. on Monday!', 'Was it late?')
    >>> split_sentences("J. K. Rowling wrote it. \\"Really?\\" she asked.")
    ('J. K. Rowling wrote it.', '"Really?" she asked.')
    >>> split_sentences("RAG结合检索与生成。它很常用！")
    ('RAG结合检索与生成。', '它很常用！')
"""

from __future__ import annotations

import re

from ragexp.common.caches import text_cache

#: Words (lower-case, without their final full stop) after which a full stop does not end a sentence.
ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt ft rev gen col lt sgt capt cmdr adm gov sen rep pres
    vs etc e.g i.e cf al approx ca dept est fig figs no nos vol vols ed eds p pp op cit
    inc ltd co corp bros llc jan feb mar apr jun jul aug sep sept oct nov dec
    mon tue tues wed thu thurs fri sat sun u.s u.k u.n a.m p.m b.c a.d d.c ph.d m.d b.a m.a""".split()
)

# A candidate boundary: terminal punctuation, optional closers, then white space.
_BOUNDARY = re.compile(r"""([.!?…]+)(["'”’)\]]*)(\s+)(?=["'“‘(\[]?[A-Z0-9À-ÖØ-Þ])""")
_CJK_STOP = re.compile(r"([。！？]+[”’」』）]*)")
_BLANK_LINE = re.compile(r"\n[ \t]*\n\s*")
_LAST_WORD = re.compile(r"(\S+)$")


def _is_abbreviation(before: str) -> bool:
    m = _LAST_WORD.search(before)
    if m is None:
        return False
    word = m.group(1).lstrip("\"'“‘([")
    if not word:
        return False
    if len(word) == 1 and word.isupper():
        return True  # an initial: "J. K. Rowling"
    return word.lower() in ABBREVIATIONS


def _split_block(block: str) -> list[str]:
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(block):
        if m.group(1) == "." and _is_abbreviation(block[start:m.start(1)]):
            continue
        out.append(block[start:m.end(2)])
        start = m.end(3)
    out.append(block[start:])
    pieces: list[str] = []
    for piece in out:
        if "。" in piece or "！" in piece or "？" in piece:
            parts = _CJK_STOP.split(piece)
            # re.split with a group gives text, stop, text, stop, ...: glue each stop to its text
            for i in range(0, len(parts), 2):
                pieces.append(parts[i] + (parts[i + 1] if i + 1 < len(parts) else ""))
        else:
            pieces.append(piece)
    return pieces


@text_cache(per_char=10)
def split_sentences(text: str) -> tuple[str, ...]:
    """The sentences of ``text``, stripped, in order; ``()`` for a text of white space only."""
    sentences: list[str] = []
    for block in _BLANK_LINE.split(text):
        for piece in _split_block(block):
            piece = piece.strip()
            if piece:
                sentences.append(piece)
    return tuple(sentences)


__all__ = ["ABBREVIATIONS", "split_sentences"]
