"""What the operator does when the API server refuses a write: retry it soon, or say why.

kopf retries a failed handler only for its change handlers (`on.create`, `on.update`,
...): a `kopf.TemporaryError` raised from a low-level event handler, which is how every
reconcile starts here, is logged and dropped, and the next try would wait for the next
event or the 30 s resync. So the controller keeps the refusals of one reconcile itself:
a refusal worth retrying (409 a conflict, 429 throttled, 5xx the server's trouble) asks
the 1 s timer for another reconcile after a capped backoff (`Retries`); any other (400,
403, 422: the object or the operator's rights are wrong, and trying again changes
nothing) sets `Degraded` with the call and the API server's message, as does a
retryable one still refused after `SHOWN_AFTER` tries. Pure: no clients, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

FIRST_RETRY_S = 1.0
MAX_RETRY_S = 16.0
SHOWN_AFTER = 3  # a retryable refusal this many times in a row is shown as Degraded


@dataclass(frozen=True)
class Refusal:
    """One refused call of a reconcile: what it tried and what the API server said."""

    action: str  # e.g. "create pod llama-1"
    status: int
    message: str

    @property
    def retryable(self) -> bool:
        """409 (a conflict: re-read and try again), 429 (throttled) and 5xx (the server's
        trouble, e.g. etcd timing out); the rest is the request's fault."""
        return self.status in (409, 429) or self.status >= 500

    def describe(self) -> str:
        return f"{self.action}: {self.status} {self.message}"


def degraded_message(refusals: Sequence[Refusal], attempts: int) -> str | None:
    """What `Degraded` says of this reconcile's refusals (None: nothing to show yet)."""
    shown = [r for r in refusals if not r.retryable or attempts >= SHOWN_AFTER]
    if not shown:
        return None
    return "the API server refused: " + "; ".join(r.describe() for r in shown)


@dataclass
class Retries:
    """Per deployment: how many reconciles in a row had a retryable refusal, and when
    the next one is due (monotonic seconds, given by the caller)."""

    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    due_at: dict[tuple[str, str], float] = field(default_factory=dict)

    def ended(self, key: tuple[str, str], refusals: Sequence[Refusal], now: float) -> int:
        """Record how a reconcile ended; returns the attempts so far (0: it went through)."""
        if not any(r.retryable for r in refusals):
            self.forget(key)
            return 0
        n = self.attempts.get(key, 0) + 1
        self.attempts[key] = n
        self.due_at[key] = now + min(FIRST_RETRY_S * 2 ** (n - 1), MAX_RETRY_S)
        return n

    def due(self, key: tuple[str, str], now: float) -> bool:
        at = self.due_at.get(key)
        return at is not None and now >= at

    def forget(self, key: tuple[str, str]) -> None:
        self.attempts.pop(key, None)
        self.due_at.pop(key, None)
