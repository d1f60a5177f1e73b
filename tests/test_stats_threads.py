"""A seed gives the same interval whatever the number of BLAS threads (docs/uncertainty.md, "Any machine").

The float32 products of resample counts and values add their terms in an order that depends on how many
threads share a product: with two or more columns at ~2,000 units, two threads gave other last digits than
one. Every resampling product of ragexp runs on one thread (stats.resampling.one_thread), so the results
below, computed with numpy's BLAS set to two threads and to one around the call, are the same to the bit.
threadpool_limits reaches the same library as OPENBLAS_NUM_THREADS, in-process. (stats.agreement's products
on the draws run on one thread too, but they add whole counts into tables, exact in any order: no case here.)
"""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from ragexp.stats.intervals import joint_intervals, mean_intervals, ratio_intervals
from ragexp.stats.paired import paired_compare_columns
from ragexp.stats.resampling import one_thread

N = 2_000
RESAMPLES = 2_000
_rng = np.random.default_rng(5)
SCORES = _rng.random(N)  # token-F1-like
HITS = _rng.integers(0, 2, N).astype(float)
OTHER = _rng.random(N)
PAIRS = [i // 2 for i in range(N)]  # 1,000 clusters of two
COLUMNS = {"a": SCORES.tolist(), "b": HITS.tolist(), "c": OTHER.tolist()}
BASE, CAND = np.stack([SCORES, OTHER], axis=1), np.stack([OTHER, SCORES], axis=1)

CASES = {
    "mean percentile": lambda: mean_intervals(COLUMNS, resamples=RESAMPLES),
    "mean bca": lambda: mean_intervals(COLUMNS, resamples=RESAMPLES, method="bca"),
    "mean clustered": lambda: mean_intervals(COLUMNS, clusters=PAIRS, resamples=RESAMPLES),
    "ratio": lambda: ratio_intervals({"r": (SCORES, OTHER), "s": (OTHER, SCORES)}, resamples=RESAMPLES),
    "joint": lambda: joint_intervals(COLUMNS, {"r": (SCORES, OTHER)}, resamples=RESAMPLES),
    "paired": lambda: paired_compare_columns(BASE, CAND, resamples=RESAMPLES),
    "paired clustered": lambda: paired_compare_columns(BASE, CAND, clusters=PAIRS, resamples=RESAMPLES),
}


def _openblas() -> bool:
    return any(lib["user_api"] == "blas" for lib in threadpool_info())


@pytest.mark.skipif(not _openblas(), reason="no BLAS library threadpoolctl can set")
@pytest.mark.parametrize("case", sorted(CASES))
def test_same_result_on_one_and_two_blas_threads(case):
    with threadpool_limits(limits=2, user_api="blas"):
        two = CASES[case]()
    with threadpool_limits(limits=1, user_api="blas"):
        one = CASES[case]()
    assert repr(two) == repr(one)  # repr of floats: every bit


def test_one_thread_limits_blas_and_restores_it():
    with threadpool_limits(limits=2, user_api="blas"):
        with one_thread():
            inside = {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
        after = {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}
    assert inside <= {1}
    assert after <= {2}
