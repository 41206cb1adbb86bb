"""ucxx's request-notifier thread, with one hand-off per wake-up instead of three.

With `UCXPY_ENABLE_PYTHON_FUTURE` (env.use_notifier_thread), a thread waits for UCX
requests to complete and has the event loop set their asyncio futures. ucxx's thread
does it with `run_coroutine_threadsafe` and waits on the concurrent future it returns:
a coroutine, a Task and a chained future for every wake-up, on a worker that wakes for
every chunk it sends or receives. This one schedules the same call with
`call_soon_threadsafe` and waits on a threading.Event, with ucxx's 10 ms bound, so the
futures are set by the same call on the same thread in the same order. 2-node chain,
100 MB, 3 runs each, interleaved: 0.47-0.54 -> 0.41-0.49 participant CPU-s
(bench/README, "Progress-thread wake-ups").
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

WAIT_NS = 1_000_000_000  # ucxx's: how long one wait for completions lasts
HANDOFF_S = 0.01  # ucxx's: how long the thread waits for the loop to set the futures


def notifier_thread(
    event_loop: asyncio.AbstractEventLoop, worker: Any, q: queue.Queue[Any]
) -> None:
    """Drop-in for ucxx._lib_async.notifier_thread._notifierThread (same arguments)."""
    from ucxx._lib.libucxx import PythonRequestNotifierWaitState as State

    asyncio.set_event_loop(event_loop)
    handed = threading.Event()

    def notify() -> None:
        try:
            worker.run_request_notifier()
        finally:
            handed.set()

    while True:
        worker.populate_python_futures_pool()
        state = worker.wait_request_notifier(period_ns=WAIT_NS)
        if not q.empty() and q.get() == "shutdown":
            break
        if state == State.Shutdown:
            break
        if state == State.Timeout:
            continue
        handed.clear()
        try:
            event_loop.call_soon_threadsafe(notify)
        except RuntimeError:  # the loop is closed: nobody is left to notify
            break
        handed.wait(HANDOFF_S)
    # As ucxx's: no future may keep the worker alive past this thread.
    worker.clear_python_futures_pool()


def install() -> None:
    """Make ucxx start this thread instead of its own (it looks the name up in
    application_context when a context starts its notifier)."""
    from ucxx._lib_async import application_context

    application_context._notifierThread = notifier_thread
