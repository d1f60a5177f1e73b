"""The seeded resample draws every bootstrap of ragexp shares: a generator, and the draw of
``resamples`` resamples of ``groups`` units (samples or clusters) as count matrices, made in
chunks so that memory stays bounded. :mod:`ragexp.stats.intervals`, :mod:`ragexp.stats.agreement`
and :mod:`ragexp.stats.paired` draw from here, so one seed gives the same resamples everywhere.

    >>> c = count_matrix(generator(0), 5, 3)
    >>> c.shape, c.sum(axis=1).tolist()
    ((3, 5), [5.0, 5.0, 5.0])
"""

from __future__ import annotations

from typing import Any, Iterator

#: resamples × groups drawn at a time (bounds the memory of the count matrix to ~32 MB)
CHUNK_CELLS = 4_000_000
#: counts made this many cells at a time (~0.5 MB of indices: they stay in the processor's cache)
_CACHE_CELLS = 65_536


def generator(seed: Any):
    """The resampling generator (SFC64: faster than numpy's default PCG64 at drawing indices)."""
    import numpy as np

    return np.random.Generator(np.random.SFC64(seed))


def draws(seed: int, groups: int, resamples: int) -> Iterator[tuple[int, int, Any]]:
    """``(start, size, counts)`` chunks of the seeded draw of ``resamples`` resamples of ``groups`` units."""
    rng = generator(int(seed))
    chunk = max(1, CHUNK_CELLS // groups)
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        yield start, size, count_matrix(rng, groups, size)


def count_matrix(rng, groups: int, size: int):
    """``size`` resamples of ``groups`` units with replacement, as a size × groups float32 count matrix.

    float32: the counts are small integers (exact), and the matrix products that turn them into
    resampled sums run twice as fast; their rounding (~1e-7 relative) is far below the
    bootstrap's own Monte-Carlo error. Counted a few rows at a time, so that each row's counts
    stay in the processor's cache: the same draws as in one call (numpy's 32-bit draws for a
    range below 2**32 run on whatever the size of the call), in about half the time.
    """
    import numpy as np

    out = np.empty((size, groups), dtype=np.float32)
    step = max(1, _CACHE_CELLS // groups)
    for row in range(0, size, step):
        rows = min(step, size - row)
        idx = rng.integers(0, groups, size=(rows, groups))
        idx += (np.arange(rows) * groups)[:, None]
        out[row:row + rows] = np.bincount(idx.ravel(), minlength=rows * groups).reshape(rows, groups)
    return out
