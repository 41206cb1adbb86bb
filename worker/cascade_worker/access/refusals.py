"""Peers refused at the worker's door, counted process-wide for its /metrics.

Transfers and stage sessions come and go with their servers; the count stays with the
process. Kept apart from auth.py (HTTP) so the UCX transports count without aiohttp.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from cascade_protocol.peer_auth import PeerKey, PeerProof, check
from cascade_worker.transport.frames import FrameError

HTTP = "http"  # the other surfaces are peer_auth.MULTICAST and PIPELINE


class Refusals(Collector):
    """Refused peers by surface (http, multicast, pipeline) and reason, process-wide:
    transfers and stage sessions come and go, the count stays."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}

    def add(self, surface: str, reason: str) -> None:
        with self._lock:
            key = (surface, reason)
            self._counts[key] = self._counts.get(key, 0) + 1

    def total(self, surface: str | None = None) -> int:
        with self._lock:
            return sum(n for (s, _), n in self._counts.items() if surface in (None, s))

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "cascade_worker_peers_refused",
            "Requests and connections refused: missing or wrong deployment credentials, a "
            "peer outside the plan, a data port with nothing served, too many connections, "
            "a UCX handshake not finished in time.",
            labels=["surface", "reason"],
        )
        with self._lock:
            for (surface, reason), n in sorted(self._counts.items()):
                family.add_metric([surface, reason], n)
        yield family


REFUSED = Refusals()


def count(surface: str, why: str) -> None:
    REFUSED.add(surface, reason_kind(why))


def reason_kind(why: str) -> str:
    """A closed set of metric label values from a refusal message."""
    kinds = {
        "no credentials": "no_credentials",
        "wrong credentials": "wrong_credentials",
        "outside": "stale_proof",
        "not in the plan": "not_in_plan",
        "handshake": "unfinished_handshake",
        "connections open": "too_many_connections",
        "nothing is served": "idle_port",
    }
    return next((label for text, label in kinds.items() if text in why), "other")


def admit(
    key: PeerKey | None,
    proof: PeerProof | None,
    purpose: str,
    who: str,
    what: str,
    members: Collection[str] = (),
) -> None:
    """Let a UCX connection's opening frame through, or refuse it (FrameError: the
    transport closes the connection) before it is served anything: no valid proof of the
    deployment's token, or (`members` given) `who` is not in the plan."""
    why = check(key, proof, purpose, who)
    if why is None and members and who not in members:
        why = "not in the plan"
    if why is not None:
        count(purpose, why)
        raise FrameError(f"refused {what} from {who!r}: {why}")
