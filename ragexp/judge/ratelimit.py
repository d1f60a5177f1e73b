"""Pacing of judge requests: an optional requests-per-minute cap, and a pause on a 429.

:class:`RateLimiter` spaces request starts at least ``60 / rpm`` seconds apart (no bursts), and
:meth:`RateLimiter.pause` holds every new request until a moment a 429's ``Retry-After`` named,
so the whole run backs off together instead of each request hammering the server on its own.
"""

from __future__ import annotations

import asyncio
import time


class RateLimiter:
    """``await limiter.acquire()`` before each request."""

    def __init__(self, requests_per_minute: float | None = None, clock=time.monotonic):
        self.interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._clock = clock
        self._next = 0.0  # earliest start of the next request
        self._paused_until = 0.0
        self._lock: asyncio.Lock | None = None

    def pause(self, seconds: float) -> None:
        """Hold new requests for ``seconds`` from now (a server said Retry-After)."""
        self._paused_until = max(self._paused_until, self._clock() + max(0.0, seconds))

    async def acquire(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one waiter at a time keeps the spacing exact
            while True:
                now = self._clock()
                start = max(now, self._next, self._paused_until)
                if start <= now:
                    break
                await asyncio.sleep(start - now)
            self._next = self._clock() + self.interval
