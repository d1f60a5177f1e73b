"""The seeded resample draws every bootstrap of ragexp shares: a generator, and the draw of
``resamples`` resamples of ``groups`` units (samples or clusters) as count matrices, made in
chunks so that memory stays bounded (a float32 chunk of 16 MB at a time: :func:`draws`). :mod:`ragexp.stats.intervals`, :mod:`ragexp.stats.agreement`
and :mod:`ragexp.stats.paired` draw from here, so one seed gives the same resamples everywhere, and
make their products of the draws on one BLAS thread (:func:`one_thread`), so one seed gives the same
interval on any machine.

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


def one_thread():
    """A context manager that runs the BLAS library's products (numpy's matrix product) on one thread.

    A float32 product of counts and values adds its terms in an order that depends on how many
    threads share it, so the last digits of an interval would depend on the machine's cores (or
    ``OPENBLAS_NUM_THREADS``); on one thread they do not, and no idle thread spins after each product.
    Entered once around a whole resampling loop (~1 ms), through threadpoolctl's public API
    (docs/uncertainty.md, "Reproducibility").
    """
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def draws(seed: int, groups: int, resamples: int) -> Iterator[tuple[int, int, Any]]:
    """``(start, size, counts)`` chunks of the seeded draw of ``resamples`` resamples of ``groups`` units,
    each drawn as it is given out (its products are made on one thread: :func:`one_thread`).

    >>> [(start, size, c.dtype.name) for start, size, c in draws(0, 1_000_000, 9)]
    [(0, 4, 'float32'), (4, 4, 'float32'), (8, 1, 'float32')]
    """
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
