"""ucxx's progress thread starts with our epoll timeout, not ucxx's 1 ms (transport/env.py
says why: an idle worker woke 1,000 times a second)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from cascade_worker.transport.env import (
    PROGRESS_WAKE_ENV,
    PROGRESS_WAKE_MS,
    progress_wake_ms,
    ucx,
)


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
