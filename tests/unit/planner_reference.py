"""The planner's flow model and pacing as they were before issue 15 made them fast.

Kept verbatim (bar names) as the full path the fast code must match float for float:
max-min rates raising every active flow each round, chain timing that re-scans all
flows per event and every segment per block, and a paced fabric copied node by node.
Tests only: nothing in the planner imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from cascade_planner.topology import BYTES_PER_MBIT, Link, Topology

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


def predict_chains(
    routes: Sequence[Sequence[str]],
    sizes: Sequence[Sequence[int]],
    path: Callable[[str, str], Sequence[Link]],
    capacity: Callable[[Link], float],
    *,
    fill_bytes: float,
    hop_latency_s: float = 0.0,
) -> tuple[list[list[float]], list[list[list[float]]]]:
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
    return complete, arrivals


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


def send_capped_copy(topo: Topology, mbit: float | None) -> Topology:
    """The fabric as weight traffic sees it when every sender is paced to `mbit` (the
    workers' Pacer, spec.multicast.rateMbit): each link out of a node, NIC or NVLink,
    carries at most that, and so does a sender over all its links (`send_cap`)."""
    if mbit is None:
        return topo
    rate = mbit * BYTES_PER_MBIT  # the pacer paces payload bytes
    nodes = {n: replace(i, nic_out=min(i.nic_out, rate)) for n, i in topo.nodes.items()}
    cap = {link: min(c, rate) if link[0][0] == "node" else c for link, c in topo._cap.items()}
    params = replace(
        topo.params, default_nic_mbit=min(topo.params.default_nic_mbit, mbit / topo.params.goodput)
    )
    return Topology(nodes, params, list(topo.warnings), cap, send_cap=rate)
