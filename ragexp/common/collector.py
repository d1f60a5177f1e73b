"""The garbage collector paused around work that makes many objects and no reference cycle (reading a dataset,
scoring it, importing litellm): each collection would walk every object made so far again
(docs/performance.md, "Scale" and "Test-set generation")."""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The collector off for the block, then as it was (a block inside another leaves it off).

    >>> with collector_paused():
    ...     gc.isenabled()
    False
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
