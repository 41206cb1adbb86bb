"""The one asynchronous poll of the unit tests: wait on the event a test is about, never
a fixed sleep. The synchronous one is `cascade_dev.testing.wait_for`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def until(
    check: Callable[[], bool], timeout: float = 5.0, what: str = "the condition"
) -> None:
    """Poll `check` every 5 ms on the running loop until it holds; fail naming `what`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.005)


async def until_doc(
    fetch: Callable[[], Awaitable[T]],
    test: Callable[[T], bool],
    timeout: float = 10.0,
    what: str = "the document",
    every: float = 0.02,
) -> T:
    """Fetch a document (a status, a report) until `test` holds and return it; fail naming
    `what` and the last document seen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not test(doc := await fetch()):
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}: {doc}")
        await asyncio.sleep(every)
    return doc
