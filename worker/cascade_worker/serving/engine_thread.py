"""The one thread that owns an EngineCore: commands in, step results out.

An EngineCore is synchronous and not thread-safe, and a step is long (a forward pass;
torch releases the GIL meanwhile), so it lives on its own thread and the event loop
never calls it. The loop side sends commands (add, abort, set_max_batch) through a
deque and a wake-up event; the thread runs them between steps, steps while the core has
work and otherwise sleeps on the event: no polling. Everything it reports goes back
through `loop.call_soon_threadsafe`, so the loop side needs no locks.

A step (or stats) that raises fails the requests the core was running, not the thread:
they are aborted in the core and reported to the loop, which ends their streams with an
ERROR chunk; the engine keeps taking new requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from cascade_protocol.generate import GenerateChunk, GenerateRequest
from cascade_worker import accelerator
from cascade_worker.engine.core import EngineCore, EngineStats

log = logging.getLogger(__name__)

# (chunks of one step, the core's stats after it, monotonic time the step ended)
OnStep = Callable[[list[GenerateChunk], EngineStats, float], None]
# (request ids the failure took down, why)
OnFailure = Callable[[list[str], str], None]
# (None after stop(), else why the thread died)
OnExit = Callable[[str | None], None]
Command = Callable[[], None]
T = TypeVar("T")


class EngineThread:
    def __init__(
        self,
        core: EngineCore,
        loop: asyncio.AbstractEventLoop,
        *,
        on_step: OnStep,
        on_failure: OnFailure,
        on_exit: OnExit,
        name: str = "cascade-engine",
    ) -> None:
        self.core = core
        self._loop = loop
        self._on_step, self._on_failure, self._on_exit = on_step, on_failure, on_exit
        self._inbox: deque[Command] = deque()  # append/popleft are atomic
        self._wake = threading.Event()
        self._stopping = False
        self._active: set[str] = set()  # ids the core holds; touched by this thread only
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    # -- loop side --------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def send(self, command: Command) -> None:
        """Run `command` on the engine thread before its next step."""
        self._inbox.append(command)
        self._wake.set()

    def call(self, fn: Callable[[EngineCore], T]) -> asyncio.Future[T]:
        """Run `fn(core)` on the engine thread; its result (or exception) on the loop."""
        future: asyncio.Future[T] = self._loop.create_future()

        def command() -> None:
            try:
                result = fn(self.core)
            except Exception as exc:
                self._post(settle, future, None, exc)
            else:
                self._post(settle, future, result, None)

        self.send(command)
        return future

    def add(self, request: GenerateRequest) -> asyncio.Future[None]:
        """Add `request`; the future fails with what add_request raised (RequestRejected)."""
        future: asyncio.Future[None] = self._loop.create_future()
        self.send(lambda: self._add(request, future))
        return future

    def abort(self, request_id: str) -> None:
        self.send(lambda: self._abort(request_id))

    def stop(self) -> None:
        """Ask the thread to end after its current step; see `join`."""
        self._stopping = True
        self._wake.set()

    def join(self, timeout_s: float) -> bool:
        """Blocking; True when the thread ended within `timeout_s`."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    # -- engine thread ----------------------------------------------------------

    def _post(self, callback: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is listening
            self._loop.call_soon_threadsafe(callback, *args)

    def _run(self) -> None:
        accelerator.enter()  # the dev cluster's GPU: steps run under the node's quota
        exit_reason: str | None = None
        try:
            while True:
                self._wake.clear()  # before reading the inbox: a later send() re-sets it
                while self._inbox:
                    self._command(self._inbox.popleft())
                if self._stopping:
                    break
                if self.core.has_work():
                    self._step()
                else:
                    self._wake.wait()
        except BaseException as exc:  # a bug in this loop or in has_work(): say so, end
            log.exception("engine thread died")
            exit_reason = f"engine thread died: {exc!r}"
        self._post(self._on_exit, exit_reason)

    @staticmethod
    def _command(command: Command) -> None:
        try:
            command()
        except Exception:
            log.exception("engine command failed")

    def _step(self) -> None:
        try:
            chunks = self.core.step()
            stats = self.core.stats()
        except Exception as exc:
            log.exception("engine step failed; failing %d request(s)", len(self._active))
            self._fail_active(f"engine step failed: {exc!r}")
            return
        for chunk in chunks:
            if chunk.finish_reason is not None:
                self._active.discard(chunk.request_id)
        self._post(self._on_step, chunks, stats, time.monotonic())

    def _fail_active(self, why: str) -> None:
        failed = sorted(self._active)
        self._active.clear()
        for request_id in failed:  # best effort: the core may be in any state now
            with contextlib.suppress(Exception):
                self.core.abort_request(request_id)
        self._post(self._on_failure, failed, why)

    def _add(self, request: GenerateRequest, future: asyncio.Future[None]) -> None:
        try:
            self.core.add_request(request)
        except Exception as exc:  # RequestRejected, or an engine bug: the caller decides
            self._post(settle, future, None, exc)
            return
        self._active.add(request.request_id)
        self._post(settle, future, None, None)

    def _abort(self, request_id: str) -> None:
        self._active.discard(request_id)
        try:
            self.core.abort_request(request_id)
        except Exception:
            log.exception("abort of %s failed", request_id)


def settle(future: asyncio.Future[T], result: T, exc: BaseException | None = None) -> None:
    """Resolve `future` on the loop unless it is done (its waiter gave up)."""
    if future.done():
        return
    if exc is None:
        future.set_result(result)
    else:
        future.set_exception(exc)
