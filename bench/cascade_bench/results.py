"""From per-node result files to one line per method.

Every participant (a Cascade multicast node, a gloo rank) writes the same JSON shape:
`{"node", "block_arrivals": {index: s}, "complete_s", "missing": [...], "bytes_received"}`,
times in seconds since the common start. A method's time is its slowest receiver's; with
`--repeat` the median run is reported and every run is kept.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from cascade_bench.bound import ratio, speedup


@dataclass(frozen=True)
class NodeResult:
    node: str
    complete_s: float | None
    block_arrivals: dict[int, float]
    missing: tuple[int, ...]
    bytes_received: int
    error: str | None = None  # the participant's own report of what went wrong
    start_wall: float | None = None  # time.time() at this node's start (its time zero)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeResult:
        arrivals = {int(k): float(v) for k, v in (data.get("block_arrivals") or {}).items()}
        done = data.get("complete_s")
        return cls(
            node=str(data["node"]),
            complete_s=None if done is None else float(done),
            block_arrivals=arrivals,
            missing=tuple(int(b) for b in data.get("missing") or ()),
            bytes_received=int(data.get("bytes_received") or 0),
            error=None if data.get("error") is None else str(data["error"]),
            start_wall=float(data["start_wall"]) if data.get("start_wall") else None,
        )

    @property
    def complete(self) -> bool:
        return self.complete_s is not None and not self.missing

    def whole_model_s(self, nblocks: int) -> float | None:
        """When this node first held every block (last arrival), or None."""
        if not self.complete:
            return None
        if self.block_arrivals and len(self.block_arrivals) >= nblocks:
            return max(self.block_arrivals.values())
        return self.complete_s


@dataclass(frozen=True)
class RunSummary:
    """One run of one method."""

    completion_s: float | None  # slowest receiver done (None: someone did not finish)
    first_model_s: float | None  # slowest receiver first held a whole model
    per_node_s: dict[str, float | None]
    bytes_received: int
    error: str | None = None
    cpu: dict[str, float] = field(default_factory=dict)  # see cpu.CpuTrace.between
    lingering: list[str] = field(default_factory=list)  # did not exit after reporting: killed


def summarize_run(
    results: Sequence[NodeResult], receivers: Iterable[str], nblocks: int, error: str | None = None
) -> RunSummary:
    """The slowest of the expected receivers; a missing result counts as not finished."""
    by_node = {r.node: r for r in results}
    per_node: dict[str, float | None] = {}
    firsts: list[float | None] = []
    for name in receivers:
        r = by_node.get(name)
        per_node[name] = r.complete_s if r and r.complete else None
        firsts.append(r.whole_model_s(nblocks) if r else None)
    done = list(per_node.values())
    finished = bool(done) and all(t is not None for t in done)
    if not finished and error is None:
        late = sorted(n for n, t in per_node.items() if t is None)
        error = f"receivers did not finish: {', '.join(late)}"
    reported = [f"{r.node}: {r.error}" for r in results if r.error]
    if reported:
        error = "; ".join(([error] if error else []) + reported)
    return RunSummary(
        completion_s=max(t for t in done if t is not None) if finished else None,
        first_model_s=max(t for t in firsts if t is not None)
        if finished and all(t is not None for t in firsts)
        else None,
        per_node_s=per_node,
        bytes_received=sum(r.bytes_received for r in results if r.node in per_node),
        error=error,
    )


@dataclass(frozen=True)
class MethodSummary:
    """A method over all repeats: the median run's times, the bound ratio, the speedup."""

    completion_s: float | None
    first_model_s: float | None
    ratio: float | None
    first_model_ratio: float | None
    speedup_vs_unicast: float | None
    host_busy: float | None = None  # median share of all host CPUs busy during the transfer
    cpu_s: float | None = None  # median CPU seconds the participants used during it
    runs: list[RunSummary] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _median(values: Sequence[float | None]) -> float | None:
    """Median of the runs; any unfinished run makes the method unfinished."""
    if not values or any(v is None for v in values):
        return None
    return statistics.median(v for v in values if v is not None)


def summarize_methods(
    runs: Mapping[str, Sequence[RunSummary]], bound_s: float, baseline: str = "unicast"
) -> dict[str, MethodSummary]:
    """Median per method, then ratios to the bound and speedups against `baseline`."""
    medians = {
        m: (_median([r.completion_s for r in rs]), _median([r.first_model_s for r in rs]))
        for m, rs in runs.items()
    }
    base = medians.get(baseline, (None, None))[0]
    return {
        m: MethodSummary(
            completion_s=done,
            first_model_s=first,
            ratio=ratio(done, bound_s),
            first_model_ratio=ratio(first, bound_s),
            speedup_vs_unicast=speedup(base, done),
            host_busy=_median([r.cpu.get("host_busy") for r in runs[m]]),
            cpu_s=_median([r.cpu.get("participants_cpu_s") for r in runs[m]]),
            runs=list(runs[m]),
        )
        for m, (done, first) in medians.items()
    }
