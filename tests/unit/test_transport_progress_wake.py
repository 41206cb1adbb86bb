"""ucxx's progress thread starts with our epoll timeout, not ucxx's 1 ms (transport/env.py
says why: an idle worker woke 1,000 times a second), and its notifier thread is ours
(transport/notifier.py: one hand-off to the loop per wake-up)."""

from __future__ import annotations

import asyncio
import gc
import queue
import threading
from typing import Any

import pytest

from cascade_worker.transport.env import PROGRESS_WAKE_ENV, PROGRESS_WAKE_MS, progress_wake_ms, ucx
from cascade_worker.transport.notifier import notifier_thread


class FakeWorker:
    def __init__(self) -> None:
        self.started: list[dict[str, Any]] = []
        self.stopped = 0

    def set_progress_thread_start_callback(self, callback: Any) -> None:
        self.callback = callback

    def start_progress_thread(self, **kwargs: Any) -> None:
        self.started.append(kwargs)

    def stop_progress_thread(self) -> None:
        self.stopped += 1


def test_the_timeout_is_ours_unless_the_environment_says() -> None:
    assert progress_wake_ms({}) == PROGRESS_WAKE_MS == 50
    assert progress_wake_ms({PROGRESS_WAKE_ENV: "1"}) == 1  # ucxx's own
    for bad in ("0", "-5", "fast", "2.5"):
        with pytest.raises(ValueError, match=PROGRESS_WAKE_ENV):
            progress_wake_ms({PROGRESS_WAKE_ENV: bad})


def test_ucxx_starts_its_progress_threads_with_it() -> None:
    ucx()
    from ucxx._lib_async import application_context

    patched = application_context.ThreadMode
    ucx()  # every transport call imports through ucx(): patched once
    assert application_context.ThreadMode is patched
    worker, loop = FakeWorker(), asyncio.new_event_loop()
    mode = patched(worker, loop, polling_mode=False)
    assert worker.started == [{"polling_mode": False, "epoll_timeout": PROGRESS_WAKE_MS}]
    loop.close()
    del mode, loop  # the loop holds the mode (ucxx wraps its close)
    gc.collect()
    assert worker.stopped == 1  # its finalizer stops the thread, as ucxx's own does


class FakeNotifierWorker:
    """Completions come in as `states`; each Ready must be handed to the loop's thread."""

    def __init__(self, states: list[Any]) -> None:
        self.states = states
        self.notified_on: list[int] = []
        self.cleared = False

    def populate_python_futures_pool(self) -> None:
        pass

    def wait_request_notifier(self, period_ns: int) -> Any:
        return self.states.pop(0)

    def run_request_notifier(self) -> None:
        self.notified_on.append(threading.get_ident())

    def clear_python_futures_pool(self) -> None:
        self.cleared = True


def test_the_notifier_sets_futures_on_the_loop_and_stops_on_shutdown() -> None:
    ucx()
    from ucxx._lib.libucxx import PythonRequestNotifierWaitState as State
    from ucxx._lib_async import application_context

    assert application_context._notifierThread is notifier_thread
    states = [State.Ready, State.Timeout, State.Ready, State.Shutdown]
    worker, q = FakeNotifierWorker(states), queue.Queue[Any]()

    async def main() -> None:
        thread = threading.Thread(target=notifier_thread, args=(loop, worker, q))
        thread.start()
        while thread.is_alive():
            await asyncio.sleep(0.001)

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    assert worker.notified_on == [threading.get_ident()] * 2  # each Ready, on the loop
    assert worker.cleared and not states
