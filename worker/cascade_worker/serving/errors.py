"""Why the serving layer refuses a request before it runs, as exceptions the API maps.

`RequestRejected` (engine/core.py) is the third kind: the request itself is bad.
"""

from __future__ import annotations


class NotServing(Exception):
    """No engine takes requests now (none started, starting, draining, stopped): 503."""


class WaitingQueueFull(Exception):
    """The waiting queue is at its limit: 429, the client (the gateway) retries later."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
