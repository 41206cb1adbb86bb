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

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

from cascade_planner.chain_rates import chain_rates, link_users
from cascade_planner.topology import Link

_EPS = 1e-9
_INF = float("inf")


def _ids(
    path: Sequence[Link], ids: dict[Link, int], caps: list[float], capacity: Callable[[Link], float]
) -> tuple[int, ...]:
    """`path` as link ids; a link seen first gets the next id and its capacity in `caps`."""
    out = []
    for link in path:
        found = ids.get(link)
        if found is None:
            found = ids[link] = len(caps)
            caps.append(capacity(link))
        out.append(found)
    return tuple(out)


def max_min_rates(
    paths: Sequence[Sequence[Link]],
    capacity: Callable[[Link], float],
    upstream: Sequence[int] | None = None,
) -> list[float]:
    """Max-min fair rates (bytes/s); `upstream[i]` >= 0 caps flow i at that flow's rate.
    The general model: predict_chains re-shares whole chains with chain_rates.py, which
    gives the same floats for upstream = the hop before."""
    ids: dict[Link, int] = {}
    caps: list[float] = []
    link_paths = [_ids(p, ids, caps, capacity) for p in paths]
    n = len(link_paths)
    rates = [0.0] * n
    children: dict[int, list[int]] = {}
    if upstream is not None:
        for i, up in enumerate(upstream):
            if up >= 0:
                children.setdefault(up, []).append(i)
    users = link_users(link_paths)
    rem = list(caps)  # by link id; only links in `live` are read
    count = [0] * len(caps)  # active flows per link
    for link, us in users.items():
        count[link] = len(us)
    live = list(users)
    active = [True] * n
    left = n
    level = 0.0  # the rate of every flow still rising: the same sums in the same order

    def freeze(i: int) -> int:
        frozen, stack = 0, [i]
        while stack:
            f = stack.pop()
            if not active[f]:
                continue
            active[f] = False
            rates[f] = level
            frozen += 1
            for link in link_paths[f]:
                count[link] -= 1
            stack.extend(children.get(f, ()))
        return frozen

    while left:
        if not live:  # flows without links are unconstrained
            for i in range(n):
                if active[i]:
                    rates[i] = float("inf")
            break
        delta = min([rem[link] / count[link] for link in live])
        level += delta
        full = []
        for link in live:
            rem[link] -= delta * count[link]
            if rem[link] <= _EPS * caps[link]:
                full.append(link)
        for link in full:
            for i in users[link]:
                left -= freeze(i)
        live = [link for link in live if count[link]]
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
    flows: list[tuple[int, int]] = []  # (chain, hop); a chain's hops are consecutive
    paths: list[tuple[int, ...]] = []  # link ids
    ids: dict[Link, int] = {}
    caps: list[float] = []
    need: list[float] = []
    for c, route in enumerate(routes):
        total = float(sum(sizes[c]))
        for j in range(len(route) - 1):
            flows.append((c, j))
            paths.append(_ids(path(route[j], route[j + 1]), ids, caps, capacity))
            need.append(total + (j + 1) * fill_bytes)
    progress = [0.0] * len(flows)
    segments: list[list[tuple[float, float, float]]] = [[] for _ in flows]  # (t0, p0, rate)
    first = list(accumulate((max(0, len(r) - 1) for r in routes), initial=0))  # chain -> flow
    live = [c for c, route in enumerate(routes) if len(route) > 1]
    chain_of, users = [c for c, _ in flows], link_users(paths)
    t = 0.0
    while live:
        idx = [i for c in live for i in range(first[c], first[c + 1])]
        rates = chain_rates(live, first, chain_of, paths, users, caps)
        takes = [
            (need[i] - progress[i] if need[i] > progress[i] else 0.0) / r if r > 0 else _INF
            for i, r in zip(idx, rates, strict=True)
        ]
        finish, q = {}, 0
        for c in live:  # a chain lasts as long as its slowest hop
            n = first[c + 1] - first[c]
            finish[c] = max(0.0, *takes[q : q + n])
            q += n
        dt = min(finish.values())
        if dt == _INF:
            raise ValueError("a chain crosses a link of zero capacity")
        for i, r in zip(idx, rates, strict=True):
            segments[i].append((t, progress[i], r))
            progress[i] += r * dt
        t += dt
        live = [c for c in live if finish[c] > dt * (1 + _EPS)]
    complete: list[list[float]] = [[] for _ in routes]
    arrivals: list[list[list[float]]] = [[] for _ in routes]
    cums = [list(accumulate(s, initial=0.0))[1:] for s in sizes]  # 0.0 + s0, + s1, ...
    for i, (c, j) in enumerate(flows):
        lat = (j + 1) * hop_latency_s
        offset = (j + 1) * fill_bytes
        times = _reach_all(segments[i], [cum + offset for cum in cums[c]], lat)
        # The last mark is need[i] itself (integer byte sums are exact in floats).
        complete[c].append(times[-1] if times else _reach(segments[i], need[i]) + lat)
        arrivals[c].append(times)
    return ChainTimes(complete=complete, arrivals=arrivals)


def _reach(segments: Sequence[tuple[float, float, float]], x: float) -> float:
    """First time the piecewise-linear progress reaches x."""
    for k, (t0, p0, rate) in enumerate(segments):
        end = segments[k + 1][1] if k + 1 < len(segments) else float("inf")
        if x <= end * (1 + _EPS) or k + 1 == len(segments):
            return t0 + max(0.0, x - p0) / rate if rate > 0 else float("inf")
    return 0.0


def _reach_all(
    segments: Sequence[tuple[float, float, float]], marks: Sequence[float], lat: float
) -> list[float]:
    """`_reach(segments, x) + lat` for rising marks, one slice of marks per segment (the
    segment `_reach` picks only moves forward as x grows): O(blocks + segments) per hop,
    with the same arithmetic as `_reach`, so the same floats."""
    if not segments:
        return [0.0 + lat for _ in marks]
    out: list[float] = []
    start, last = 0, len(segments) - 1
    for k, (t0, p0, rate) in enumerate(segments):
        stop = len(marks) if k == last else bisect_right(marks, segments[k + 1][1] * (1 + _EPS))
        if stop <= start:
            continue
        if rate > 0:
            out += [t0 + (x - p0 if x > p0 else 0.0) / rate + lat for x in marks[start:stop]]
        else:
            out += [float("inf") + lat] * (stop - start)
        start = stop
    return out


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
