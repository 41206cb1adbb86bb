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
the chain's order, plus j+1 hop latencies. Chains are predicted in chain_flow.py.

Binomial steps are synchronous in the model: a step lasts max over links of (bytes of
the step crossing the link) / capacity, plus one hop latency. That is the step's
makespan under ideal sharing, and equals the max-min fair makespan when the step's
blocks are one size (max-min gives every flow on the bottleneck the same rate), at a
fraction of the cost (a step can have hundreds of transfers). The executor has no global
barrier, so a later step may start early on some nodes; the model does not credit that.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cascade_planner.topology import Link

_EPS = 1e-9
_INF = float("inf")


def max_min_rates(
    paths: Sequence[Sequence[Link]],
    capacity: Callable[[Link], float],
    upstream: Sequence[int] | None = None,
) -> list[float]:
    """Max-min fair rates (bytes/s); `upstream[i]` >= 0 caps flow i at that flow's rate."""
    ids: dict[Link, int] = {}
    caps: list[float] = []
    return fair_rates([_ids(p, ids, caps, capacity) for p in paths], caps, upstream)


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


def fair_rates(
    paths: Sequence[Sequence[int]], caps: Sequence[float], upstream: Sequence[int] | None = None
) -> list[float]:
    """`max_min_rates` over link ids (`caps[id]`: bytes/s): each capacity looked up once."""
    n = len(paths)
    rates = [0.0] * n
    children: dict[int, list[int]] = {}
    if upstream is not None:
        for i, up in enumerate(upstream):
            if up >= 0:
                children.setdefault(up, []).append(i)
    users: dict[int, list[int]] = {}
    for i, path in enumerate(paths):
        for link in path:
            users.setdefault(link, []).append(i)
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
            for link in paths[f]:
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
