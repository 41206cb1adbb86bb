"""The parameter pool: who holds a deployment's weights, who may send them, and who
reads them from storage.

BlitzScale's point is that O(1) host caching is enough when weights move over the
compute network: serving instances (GPU tier) send to new ones, and a few host copies
(`spec.hostCopies` pods, host_copies.py: the worker without an engine) keep the model
one transfer away when no instance holds it, at `replicas: 0` too. This module decides,
from a snapshot of the instances and host copies alone:

- the model digest the pool is about (the one given, else the one most holders hold);
- the sources a plan may use now, preferred first: host copies (sending competes with
  no serving), then idle instances, then serving ones;
- which pod loads the checkpoint from storage when no copy exists at all: an instance
  (it serves sooner) else a host copy; never while a load runs.

Host copies that lack the model are ordinary plan targets (targets.py): a lost copy is
re-created by the instance decisions and filled from a peer. Pure, no memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cascade_api.scaleplan import Source, SourceTier
from cascade_operator.weights.workers import WorkerView
from cascade_protocol.status import WorkerPhase


@dataclass(frozen=True)
class PoolInput:
    workers: Sequence[WorkerView]  # instances and host copies (WorkerView.host_copy)
    host_copies: int  # spec.hostCopies
    model_digest: str | None = None  # the served model; None: what most holders hold
    now: float | None = None  # wall clock, for load backoff; None: ignore backoff


@dataclass(frozen=True)
class PoolDecision:
    model_digest: str | None
    # Pods a plan may send from now (hold everything, run no job), preferred first.
    sources: list[Source] = field(default_factory=list)
    holders: list[str] = field(default_factory=list)  # every pod with the whole model
    host_copies: list[str] = field(default_factory=list)  # host-copy pods holding it
    # Pod that should pack the checkpoint (POST /v1/control/load): no copy exists.
    load_from_storage: str | None = None
    shortfall: int = 0  # host copies wanted that do not hold the model (yet)
    message: str = ""


def served_digest(workers: Sequence[WorkerView], wanted: str | None) -> str | None:
    if wanted is not None:
        return wanted
    counts = Counter(w.model_digest for w in workers if w.has_model and w.model_digest)
    if not counts:
        return None
    return min(counts, key=lambda d: (-counts[d], d))


def decide_pool(inp: PoolInput) -> PoolDecision:
    digest = served_digest(inp.workers, inp.model_digest)
    holders = sorted((w for w in inp.workers if w.holds(digest)), key=lambda w: w.name)
    copies = [w.name for w in holders if w.host_copy]
    sources = _sources(holders)
    loader, waiting = None, ""
    if not holders and not any(w.alive and w.phase == WorkerPhase.LOADING for w in inp.workers):
        wait = {w.name: retry_in(w, inp.now) for w in inp.workers}
        loader = _loader([w for w in inp.workers if wait[w.name] <= 0])
        backing = [w for w in inp.workers if wait[w.name] > 0]
        if loader is None and backing:
            soonest = min(backing, key=lambda w: wait[w.name])
            waiting = (
                f"; loading from storage backs off: {soonest.name} failed "
                f"{soonest.failures} time(s), next try in {wait[soonest.name]:.0f} s"
            )
    shortfall = max(inp.host_copies - len(copies), 0)
    message = (
        f"{len(holders)} holder(s), {len(sources)} source(s) ready, "
        f"{len(copies)}/{inp.host_copies} host copies"
        + (f" on {', '.join(copies)}" if copies else "")
        + (f"; {loader} loads from storage" if loader else "")
        + waiting
    )
    return PoolDecision(
        digest, sources, [w.name for w in holders], copies, loader, shortfall, message
    )


def _sources(holders: list[WorkerView]) -> list[Source]:
    """Ready holders, preferred first: host copies, idle instances (sending does not
    compete with serving traffic), then serving instances."""
    ready = [w for w in holders if w.complete]
    ready.sort(key=lambda w: (not w.host_copy, w.serving, w.name))
    return [
        Source(pod=w.name, tier=SourceTier.HOST if w.host_copy else SourceTier.GPU) for w in ready
    ]


LOAD_RETRY_FIRST_S = 1.0
LOAD_RETRY_CAP_S = 60.0


def load_backoff_s(failures: int) -> float:
    """Seconds to wait after `failures` failed loads in a row: 1, 2, 4, ... up to 60."""
    if failures <= 0:
        return 0.0
    return float(min(LOAD_RETRY_CAP_S, LOAD_RETRY_FIRST_S * 2.0 ** (failures - 1)))


def retry_in(w: WorkerView, now: float | None) -> float:
    """Seconds until `w` may be asked to load again (<= 0: now)."""
    if now is None or w.failed_at is None:
        return 0.0
    return w.failed_at + load_backoff_s(w.failures) - now


def _loader(workers: Sequence[WorkerView]) -> str | None:
    """The pod to load the checkpoint: a reachable idle instance (it serves sooner),
    else a host copy; lowest name first."""
    idle = [w for w in workers if w.alive and w.phase is not None and not w.busy]
    idle.sort(key=lambda w: (w.host_copy, not w.needs_weights, w.name))
    return idle[0].name if idle else None
