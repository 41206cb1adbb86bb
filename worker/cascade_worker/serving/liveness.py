"""Whether the engine thread still makes progress, for readiness and the gateway.

A step that never ends (a hung device call, a deadlock in the core) leaves the HTTP
loop answering while every running request waits. The engine is stalled when it has
requests and no step has ended for `stall_s` (counted from the later of the last step
and the moment it became busy, so an idle engine never is); the worker then reports it
as a failure, which fails readiness and stops admission until a step ends again. The
steps counter goes into every load report: the gateway sees a backend whose count stops
moving while its streams wait (cascade_gateway.stalls). Pure: time is passed in.
"""

from __future__ import annotations

# Longer than any step should take (a full prefill chunk on a slow CPU quota), far
# shorter than a request's deadline.
ENGINE_STALL_S = 20.0


class Liveness:
    def __init__(self, stall_s: float = ENGINE_STALL_S) -> None:
        self.stall_s = stall_s
        self.steps = 0  # engine steps ended since start
        self._progress_at: float | None = None  # None: idle

    def admitted(self, now: float) -> None:
        """A request came in: an idle engine is busy from now."""
        if self._progress_at is None:
            self._progress_at = now

    def stepped(self, at: float) -> None:
        self.steps += 1
        self._progress_at = at

    def stall(self, now: float, busy: bool) -> str | None:
        """Why the engine is stalled (None when it is not), given whether it holds requests."""
        if not busy:
            self._progress_at = None
            return None
        since = self._progress_at
        if since is None:  # busy since before anyone said so: from now
            self._progress_at = since = now
        quiet = now - since
        if self.stall_s <= 0 or quiet < self.stall_s:
            return None
        return f"engine stalled: no step ended for {quiet:.0f}s with requests in flight"
