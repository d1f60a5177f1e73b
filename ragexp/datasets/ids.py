"""The record ids a read has met, for the duplicate check, in 24 bytes each whatever their length.

A big file read in chunks (docs/performance.md, "Scale") keeps no record, but the duplicate check
needs every id seen so far and the row it was on: a dict of the ids themselves costs ~120 bytes an
id (~120 MB for a million records). :class:`IdRows` keeps each id's 128-bit BLAKE2b digest and its
row in sorted numpy arrays (the latest ids in a small dict until they are merged in). Two different
ids are taken for one only when their 128-bit digests are equal: for n ids the chance that this
happens at all is below n² / 2¹²⁹ (under 10⁻²⁰ for a billion ids), far below a disk's or memory's
own error rate; the error line names the id as read and the row of the one it matched.

    >>> seen = IdRows()
    >>> seen.add("q1", 1), seen.add("q2", 2), seen.add("q1", 7)
    (None, None, 1)
"""

from __future__ import annotations

import hashlib

#: ids held in the dict before they are merged into the sorted arrays
_BATCH = 65_536


class IdRows:
    """Ids met so far and their rows: :meth:`add` gives the row an id was first met on, or None."""

    def __init__(self) -> None:
        import numpy as np

        self._recent: dict[bytes, int] = {}
        self._high = np.empty(0, dtype=np.uint64)  # the digests' first 8 bytes, sorted
        self._low = np.empty(0, dtype=np.uint64)  # their last 8 bytes, in the same order
        self._rows = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self._recent) + len(self._rows)

    def add(self, record_id: str, row: int) -> int | None:
        """The row ``record_id`` was first met on, or None (then it is noted as met on ``row``)."""
        digest = hashlib.blake2b(record_id.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        first = self._recent.get(digest)
        if first is None and len(self._rows):
            first = self._sorted_row(digest)
        if first is not None:
            return first
        self._recent[digest] = row
        if len(self._recent) >= _BATCH:
            self._merge()
        return None

    def _sorted_row(self, digest: bytes) -> int | None:
        import numpy as np

        high, low = np.frombuffer(digest, dtype="<u8")
        i = int(self._high.searchsorted(high))
        while i < len(self._high) and self._high[i] == high:  # equal first halves: compare the second
            if self._low[i] == low:
                return int(self._rows[i])
            i += 1
        return None

    def _merge(self) -> None:
        import numpy as np

        both = np.frombuffer(b"".join(self._recent), dtype="<u8").reshape(-1, 2)
        rows = np.fromiter(self._recent.values(), dtype=np.int64, count=len(self._recent))
        high = np.concatenate([self._high, both[:, 0]])
        order = np.argsort(high, kind="stable")
        self._high = high[order]
        self._low = np.concatenate([self._low, both[:, 1]])[order]
        self._rows = np.concatenate([self._rows, rows])[order]
        self._recent = {}

