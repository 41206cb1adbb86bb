"""Flow model of the fabric: how long a plan takes, per target and per block.

Rates are max-min fair (progressive filling): every active flow's rate rises together
until some link is full; flows crossing a full link freeze at that rate; repeat. A link
crossed twice by one flow (a chain that leaves and re-enters a leaf) counts twice.

Chains (cut-through serial forwarding). Hop j of a chain is a flow from its upstream
to it, capped by its upstream's rate (it cannot forward faster than it receives; a
slower hop further down does not slow the hops before it, which is why BlitzScale puts
fast links first). Hop j needs M + (j+1)·fill bytes: one chunk of store-and-forward per
hop, as in `estimate_seconds`. Rates are re-shared when a whole chain finishes (an
event per chain, not per hop: hops of one chain finish within a few chunks of each
other). The time hop j holds block p is when its progress passes the bytes up to p in
the chain's order, plus j+1 hop latencies.

Binomial steps are synchronous in the model: a step lasts max over links of (bytes of
the step crossing the link) / capacity, plus one hop latency. That is the step's
makespan under ideal sharing, and equals the max-min fair makespan when the step's
blocks are one size (max-min gives every flow on the bottleneck the same rate), at a
fraction of the cost (a step can have hundreds of transfers). The executor has no global
barrier, so a later step may start early on some nodes; the model does not credit that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cascade_planner.topology import Link

_EPS = 1e-9


def max_min_rates(
    paths: Sequence[Sequence[Link]],
    capacity: Callable[[Link], float],
    upstream: Sequence[int] | None = None,
) -> list[float]:
    """Max-min fair rates (bytes/s); `upstream[i]` >= 0 caps flow i at that flow's rate."""
    n = len(paths)
    rates = [0.0] * n
    children: dict[int, list[int]] = {}
    if upstream is not None:
        for i, up in enumerate(upstream):
            if up >= 0:
                children.setdefault(up, []).append(i)
    users: dict[Link, list[int]] = {}
    for i, path in enumerate(paths):
        for link in path:
            users.setdefault(link, []).append(i)
    cap = {link: capacity(link) for link in users}
    rem = dict(cap)
    count = {link: len(us) for link, us in users.items()}
    active = [True] * n
    left = n

    def freeze(i: int) -> int:
        frozen, stack = 0, [i]
        while stack:
            f = stack.pop()
            if not active[f]:
                continue
            active[f] = False
            frozen += 1
            for link in paths[f]:
                count[link] -= 1
            stack.extend(children.get(f, ()))
        return frozen

    while left:
        live = [(link, k) for link, k in count.items() if k > 0]
        if not live:  # flows without links are unconstrained
            for i in range(n):
                if active[i]:
                    rates[i] = float("inf")
            break
        delta = min(rem[link] / k for link, k in live)
        for i in range(n):
            if active[i]:
                rates[i] += delta
        full = []
        for link, k in live:
            rem[link] -= delta * k
            if rem[link] <= _EPS * cap[link]:
                full.append(link)
        for link in full:
            for i in users[link]:
                left -= freeze(i)
    return rates


@dataclass(frozen=True)
class ChainTimes:
    complete: list[list[float]]  # [chain][hop] seconds until the hop holds every block
    arrivals: list[list[list[float]]]  # [chain][hop][position in the chain's order]


def predict_chains(
    routes: Sequence[Sequence[str]],
    sizes: Sequence[Sequence[int]],
    path: Callable[[str, str], Sequence[Link]],
    capacity: Callable[[Link], float],
    *,
    fill_bytes: float,
    hop_latency_s: float = 0.0,
) -> ChainTimes:
    """`routes[c]`: source node then hop nodes; `sizes[c]`: block bytes in send order."""
    flows: list[tuple[int, int]] = []  # (chain, hop)
    paths: list[Sequence[Link]] = []
    need: list[float] = []
    for c, route in enumerate(routes):
        total = float(sum(sizes[c]))
        for j in range(len(route) - 1):
            flows.append((c, j))
            paths.append(path(route[j], route[j + 1]))
            need.append(total + (j + 1) * fill_bytes)
    upstream = [i - 1 if j > 0 else -1 for i, (_, j) in enumerate(flows)]
    progress = [0.0] * len(flows)
    segments: list[list[tuple[float, float, float]]] = [[] for _ in flows]  # (t0, p0, rate)
    live = {c for c, route in enumerate(routes) if len(route) > 1}
    t = 0.0
    while live:
        idx = [i for i, (c, _) in enumerate(flows) if c in live]
        rates = max_min_rates([paths[i] for i in idx], capacity, _reindex(upstream, idx))
        finish: dict[int, float] = {}
        for i, r in zip(idx, rates, strict=True):
            c = flows[i][0]
            left = max(0.0, need[i] - progress[i])
            finish[c] = max(finish.get(c, 0.0), left / r if r > 0 else float("inf"))
        dt = min(finish.values())
        if dt == float("inf"):
            raise ValueError("a chain crosses a link of zero capacity")
        for i, r in zip(idx, rates, strict=True):
            segments[i].append((t, progress[i], r))
            progress[i] += r * dt
        t += dt
        live -= {c for c, f in finish.items() if f <= dt * (1 + _EPS)}
    complete: list[list[float]] = [[] for _ in routes]
    arrivals: list[list[list[float]]] = [[] for _ in routes]
    for i, (c, j) in enumerate(flows):
        lat = (j + 1) * hop_latency_s
        offset = (j + 1) * fill_bytes
        cum, times = 0.0, []
        for size in sizes[c]:
            cum += size
            times.append(_reach(segments[i], cum + offset) + lat)
        complete[c].append(_reach(segments[i], need[i]) + lat)
        arrivals[c].append(times)
    return ChainTimes(complete=complete, arrivals=arrivals)


def _reindex(upstream: Sequence[int], idx: Sequence[int]) -> list[int]:
    where = {old: new for new, old in enumerate(idx)}
    return [where.get(upstream[i], -1) for i in idx]


def _reach(segments: Sequence[tuple[float, float, float]], x: float) -> float:
    """First time the piecewise-linear progress reaches x."""
    for k, (t0, p0, rate) in enumerate(segments):
        end = segments[k + 1][1] if k + 1 < len(segments) else float("inf")
        if x <= end * (1 + _EPS) or k + 1 == len(segments):
            return t0 + max(0.0, x - p0) / rate if rate > 0 else float("inf")
    return 0.0


def predict_steps(
    steps: Sequence[Sequence[tuple[str, str, int]]],
    path: Callable[[str, str], Sequence[Link]],
    capacity: Callable[[Link], float],
    *,
    hop_latency_s: float = 0.0,
) -> list[float]:
    """End time of each step of (sender node, receiver node, bytes) transfers."""
    ends: list[float] = []
    ids: dict[Link, int] = {}
    inv: list[float] = []  # 1 / capacity, by link id
    routes: dict[tuple[str, str], list[int]] = {}
    t = 0.0
    for step in steps:
        if step:
            load: dict[int, float] = {}
            for s, r, size in step:
                route = routes.get((s, r))
                if route is None:
                    route = [_link_id(link, ids, inv, capacity) for link in path(s, r)]
                    routes[(s, r)] = route
                for i in route:
                    load[i] = load.get(i, 0.0) + size
            t += max(v * inv[i] for i, v in load.items()) + hop_latency_s
        ends.append(t)
    return ends


def _link_id(
    link: Link, ids: dict[Link, int], inv: list[float], capacity: Callable[[Link], float]
) -> int:
    found = ids.get(link)
    if found is None:
        found = ids[link] = len(inv)
        inv.append(1.0 / capacity(link))
    return found


def shown(seconds: float) -> float:
    """Seconds as a plan carries them: 6 significant digits (the flow model is no more
    precise than that, and kubectl's Predicted column stays readable)."""
    return float(f"{seconds:.6g}")
