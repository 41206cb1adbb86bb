"""One reconcile at a time per deployment, and at most one waiting for its turn.

Pod, ScalePlan, gateway and ModelDeployment events of one deployment come in bursts (a
scale-up by 5 makes dozens within seconds) and each asks for a reconcile. Reconciling is
level-triggered: a call that has not started reading yet will see every change made
before it reads. So a caller that finds another one already waiting returns at once
instead of queueing behind it. Without this, the burst held every thread of kopf's
executor (six on two cores) waiting on one lock, and the starting-pod probe, which must
reconcile within a fraction of a second, waited for a thread.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Hashable


class Serial:
    def __init__(self) -> None:
        self._locks: defaultdict[Hashable, threading.Lock] = defaultdict(threading.Lock)
        self._guard = threading.Lock()
        self._waiting: set[Hashable] = set()

    def lock(self, key: Hashable) -> threading.Lock:
        """The key's lock, for work that must not run beside a reconcile."""
        with self._guard:
            return self._locks[key]

    def run(self, key: Hashable, work: Callable[[], None], *, coalesce: bool = True) -> bool:
        """Run `work` holding the key's lock; False when a waiting call will do it instead.
        `coalesce=False`: always run (work whose side effects a reconcile does not repeat)."""
        with self._guard:
            if coalesce and key in self._waiting:
                return False
            if coalesce:
                self._waiting.add(key)
            lock = self._locks[key]
        with lock:
            if coalesce:
                with self._guard:
                    self._waiting.discard(key)
            work()
        return True
