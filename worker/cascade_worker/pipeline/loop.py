"""Asyncio loops for synchronous callers: a loop on a thread of its own, or a borrowed one.

The engine is synchronous (one thread calls `step()`), while the transport is asyncio.
The pipeline executor therefore runs its connections on a loop in another thread and
hands coroutines to it; the engine thread blocks only on the futures it needs.

Which loop: ucxx completes requests either by spinning on every loop that uses it (the
default; costly on few cores) or, with `UCXPY_ENABLE_PYTHON_FUTURE=1`, by waking the one
loop its notifier thread serves. A process that enables the latter must run all its UCX
traffic on that loop. So an executor either borrows a loop (`loop=`, already running in
another thread: the process's UCX loop) or uses `shared_loop()`, one loop thread per
process that every pipeline of the process shares.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """A loop running in a daemon thread of its own, or (`loop=`) a borrowed running one."""

    def __init__(
        self, name: str = "pipeline-loop", *, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        self.loop = asyncio.new_event_loop() if loop is None else loop
        if loop is None:
            threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def is_current(self) -> bool:
        """Is the caller running on this loop (where blocking on it would deadlock)?"""
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for its result (never from the loop's thread)."""
        if self.is_current():
            coro.close()
            raise RuntimeError("blocking on the loop from its own thread would deadlock")
        return self.submit(coro).result(timeout)

    def call_soon(self, callback: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(callback, *args)


_SHARED: list[LoopThread] = []
_SHARED_LOCK = threading.Lock()


def shared_loop() -> LoopThread:
    """The process's pipeline loop thread, started on first use and never stopped: every
    executor not given a loop uses it, so a process has one UCX loop however many
    pipelines it forms over time (required with UCXPY_ENABLE_PYTHON_FUTURE=1, cheaper
    without it: each loop polls UCX on its own)."""
    with _SHARED_LOCK:
        if not _SHARED:
            _SHARED.append(LoopThread("cascade-pipeline"))
        return _SHARED[0]
