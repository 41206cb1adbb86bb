"""A keyed work queue in the style of client-go's: a key is never processed by two
workers at once, adding a key already waiting is a no-op, a key added while it is being
processed runs again afterwards, and `add_after` schedules a later visit (back-off
timers, grace-period deadlines) without a polling loop.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque


class WorkQueue:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: set[str] = set()
        self._delayed: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._shutdown = False

    def _add(self, key: str) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cond.notify()

    def add(self, key: str) -> None:
        with self._cond:
            self._add(key)

    def add_after(self, key: str, delay: float) -> None:
        with self._cond:
            if delay <= 0:
                self._add(key)
                return
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._seq), key))
            self._cond.notify_all()

    def get(self) -> str | None:
        """Next key to process (blocks); None once shut down."""
        with self._cond:
            while True:
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    self._add(heapq.heappop(self._delayed)[2])
                if self._shutdown:
                    return None
                if self._queue:
                    key = self._queue.popleft()
                    self._processing.add(key)
                    self._dirty.discard(key)
                    return key
                timeout = self._delayed[0][0] - now if self._delayed else None
                self._cond.wait(timeout)

    def done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
