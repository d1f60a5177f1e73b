"""The seeded resample draws every bootstrap of ragexp shares: a generator, and the draw of
``resamples`` resamples of ``groups`` units (samples or clusters) as count matrices, made in
chunks so that memory stays bounded (at most a batch of 64 MiB of byte counts and a float32 chunk of
16 MB at a time: :func:`draws`). :mod:`ragexp.stats.intervals`, :mod:`ragexp.stats.agreement`
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
#: resample counts drawn ahead of their matrix products, at most this many (one byte each: 64 MiB), so that
#: the products of a draw of several chunks run back to back (:func:`draws`)
BATCH_CELLS = 64 * 2 ** 20
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
    """``(start, size, counts)`` chunks of the seeded draw of ``resamples`` resamples of ``groups`` units.

    The counts of up to :data:`BATCH_CELLS` resamples × units are drawn first, a byte a count, then given
    as float32 one chunk after the other: the same draws, chunks and matrices as one chunk at a time, so
    every product made of them is the same to the bit. The callers' products (numpy's matrix product)
    then follow each other instead of being spaced out by the draws: on several BLAS threads, the idle
    ones waited for the next product spinning for a while after each one, which cost as much processor
    time as the draws themselves (docs/performance.md); the callers now make them on one thread
    (:func:`one_thread`).

    >>> [(start, size, c.dtype.name) for start, size, c in draws(0, 1_000_000, 9)]
    [(0, 4, 'float32'), (4, 4, 'float32'), (8, 1, 'float32')]
    >>> one = [c for _, _, c in draws(3, 1_000_000, 9)]
    >>> rng = generator(3)
    >>> all(bool((c == count_matrix(rng, 1_000_000, len(c))).all()) for c in one)
    True
    """
    import numpy as np

    rng = generator(int(seed))
    chunk = max(1, CHUNK_CELLS // groups)
    starts = range(0, resamples, chunk)
    per_batch = max(1, BATCH_CELLS // (chunk * groups))
    if len(starts) == 1:  # one chunk: nothing to batch
        yield 0, resamples, count_matrix(rng, groups, resamples)
        return
    for first in range(0, len(starts), per_batch):
        batch = [(start, min(chunk, resamples - start)) for start in starts[first:first + per_batch]]
        drawn = [count_matrix(rng, groups, size, compact=True) for _, size in batch]
        drawn.reverse()  # popped from the end, in order: each byte matrix freed once given out
        for start, size in batch:
            yield start, size, drawn.pop().astype(np.float32, copy=False)


def count_matrix(rng, groups: int, size: int, *, compact: bool = False):
    """``size`` resamples of ``groups`` units with replacement, as a size × groups float32 count matrix
    (``compact``: uint8 counts, or float32 should a count exceed 255, which only more than 255 units allow).

    float32: the counts are small integers (exact), and the matrix products that turn them into
    resampled sums run twice as fast; their rounding (~1e-7 relative) is far below the
    bootstrap's own Monte-Carlo error. Counted a few rows at a time, so that each row's counts
    stay in the processor's cache: the same draws as in one call (numpy's 32-bit draws for a
    range below 2**32 run on whatever the size of the call), in about half the time.

    >>> c = count_matrix(generator(1), 4, 3, compact=True)
    >>> c.dtype.name, bool((c == count_matrix(generator(1), 4, 3)).all())
    ('uint8', True)
    """
    import numpy as np

    out = np.empty((size, groups), dtype=np.uint8 if compact else np.float32)
    check = compact and groups > 255  # a count over 255 does not fit in a byte
    step = max(1, _CACHE_CELLS // groups)
    for row in range(0, size, step):
        rows = min(step, size - row)
        idx = rng.integers(0, groups, size=(rows, groups))
        idx += (np.arange(rows) * groups)[:, None]
        counts = np.bincount(idx.ravel(), minlength=rows * groups).reshape(rows, groups)
        if check and counts.max() > 255:
            out, check = out.astype(np.float32), False  # the rows counted so far, and the rest, as float32
        out[row:row + rows] = counts
    return out
