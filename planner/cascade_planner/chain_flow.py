"""Chains in the flow model (flow.py), as array operations.

The model is flow.py's: max-min fair rates, hop j of a chain capped by hop j-1, rates
re-shared when a whole chain finishes, hop j needing M + (j+1)·fill bytes. Why arrays:
at 512 targets a prediction re-shares ~500 flows over ~1,000 links once per chain and
reads 16,000 block arrival times; one interpreter step per flow, link and block was
half of `plan()`. The arithmetic is the scalar model's, operation for operation, so the
floats are the same (tests/unit/test_planner_fastpaths.py checks against it).

Two facts of chains make the filling vectorize: a chain is live as a whole (its hops
are re-shared together), and freezing hop j freezes every later hop of its chain, so the
active hops of a chain are always a prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np
import numpy.typing as npt

from cascade_planner.flow import _reach
from cascade_planner.topology import Link

_EPS = 1e-9
_INF = float("inf")
Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class ChainTimes:
    complete: list[list[float]]  # [chain][hop] seconds until the hop holds every block
    arrivals: list[list[list[float]]]  # [chain][hop][position in the chain's order]


@dataclass(frozen=True)
class _Hops:
    """Every hop of every chain as a flow: flows of one chain are consecutive."""

    entry_flow: Ints  # one entry per (flow, link crossed); a link crossed twice: two
    entry_link: Ints
    caps: Floats  # bytes/s by link id
    chain: Ints  # flow -> chain
    hop: Ints  # flow -> hop index in its chain
    chains: int


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
    hops, need_list = _hops(routes, sizes, path, capacity, fill_bytes)
    need = np.array(need_list, dtype=np.float64)
    first = list(accumulate((max(0, len(r) - 1) for r in routes), initial=0))  # chain -> flow
    progress = np.zeros(len(need_list))
    events: list[tuple[float, Floats, Floats]] = []  # (t, progress, rates) at each re-share
    spans = [0] * len(routes)  # events during which each chain was live (a prefix)
    live = [c for c, route in enumerate(routes) if len(route) > 1]
    t = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        while live:
            flows = np.isin(hops.chain, live)
            rates = _fair_rates(hops, flows)
            gap = np.where(need > progress, need - progress, 0.0)
            takes = np.where(rates > 0, gap / rates, _INF)
            # a chain lasts as long as its slowest hop
            finish = [max(0.0, float(takes[first[c] : first[c + 1]].max())) for c in live]
            dt = min(finish)
            if dt == _INF:
                raise ValueError("a chain crosses a link of zero capacity")
            events.append((t, progress.copy(), rates))
            for c in live:
                spans[c] += 1
            progress = np.where(flows, progress + rates * dt, progress)
            t += dt
            live = [c for c, f in zip(live, finish, strict=True) if f > dt * (1 + _EPS)]
        complete: list[list[float]] = []
        arrivals: list[list[list[float]]] = []
        for c in range(len(routes)):
            lo, hi, seen = first[c], first[c + 1], events[: spans[c]]
            got = _arrivals(seen, lo, hi, sizes[c], fill_bytes, hop_latency_s)
            arrivals.append(got)
            complete.append(
                [
                    times[-1] if times else _reach(_segments(seen, f), need_list[f]) + lat
                    for f, times, lat in zip(
                        range(lo, hi), got, _latencies(hi - lo, hop_latency_s), strict=True
                    )
                ]
            )
    return ChainTimes(complete=complete, arrivals=arrivals)


def _hops(
    routes: Sequence[Sequence[str]],
    sizes: Sequence[Sequence[int]],
    path: Callable[[str, str], Sequence[Link]],
    capacity: Callable[[Link], float],
    fill_bytes: float,
) -> tuple[_Hops, list[float]]:
    """The hops as flows over link ids, and the bytes each hop needs."""
    ids: dict[Link, int] = {}
    caps: list[float] = []
    entry_flow: list[int] = []
    entry_link: list[int] = []
    chain: list[int] = []
    hop: list[int] = []
    need: list[float] = []
    for c, route in enumerate(routes):
        total = float(sum(sizes[c]))
        for j in range(len(route) - 1):
            f = len(need)
            for link in path(route[j], route[j + 1]):
                found = ids.get(link)
                if found is None:
                    found = ids[link] = len(caps)
                    caps.append(capacity(link))
                entry_flow.append(f)
                entry_link.append(found)
            chain.append(c)
            hop.append(j)
            need.append(total + (j + 1) * fill_bytes)
    hops = _Hops(
        entry_flow=np.array(entry_flow, dtype=np.int64),
        entry_link=np.array(entry_link, dtype=np.int64),
        caps=np.array(caps, dtype=np.float64),
        chain=np.array(chain, dtype=np.int64),
        hop=np.array(hop, dtype=np.int64),
        chains=len(routes),
    )
    return hops, need


def _fair_rates(hops: _Hops, flows: Bools) -> Floats:
    """flow.fair_rates for the hops in `flows` (whole chains), each capped by the hop
    before it: the same progressive filling, a level at a time."""
    links_n = len(hops.caps)
    active = flows.copy()
    rates = np.zeros(len(flows))
    count = np.bincount(hops.entry_link[active[hops.entry_flow]], minlength=links_n)
    links = np.flatnonzero(count)
    rem = hops.caps.copy()
    level = 0.0
    while active.any():
        if not len(links):  # flows without links are unconstrained
            rates[active] = _INF
            break
        delta = float((rem[links] / count[links]).min())
        level += delta
        rem[links] -= delta * count[links]
        full = np.zeros(links_n, dtype=bool)
        full[links[rem[links] <= _EPS * hops.caps[links]]] = True
        hit = hops.entry_flow[full[hops.entry_link] & active[hops.entry_flow]]
        low = np.full(hops.chains, np.iinfo(np.int64).max)
        np.minimum.at(low, hops.chain[hit], hops.hop[hit])
        frozen = active & (hops.hop >= low[hops.chain])  # and every later hop of its chain
        rates[frozen] = level
        active &= ~frozen
        count -= np.bincount(hops.entry_link[frozen[hops.entry_flow]], minlength=links_n)
        links = links[count[links] > 0]
    return rates


def _arrivals(
    events: Sequence[tuple[float, Floats, Floats]],
    lo: int,
    hi: int,
    sizes: Sequence[int],
    fill_bytes: float,
    lat_s: float,
) -> list[list[float]]:
    """flow._reach_all for hops lo..hi-1 of one chain at once: mark x of a hop is in the
    first segment whose end (the next segment's start) reaches it, else the last."""
    if hi == lo:
        return []
    cums = np.array(list(accumulate(sizes, initial=0.0))[1:], dtype=np.float64)
    lat = np.array(_latencies(hi - lo, lat_s))
    if not events:
        return [[0.0 + x for _ in sizes] for x in lat.tolist()]
    marks = cums[None, :] + (np.arange(1, hi - lo + 1) * fill_bytes)[:, None]  # [hop][block]
    t0 = np.array([e[0] for e in events])
    p0 = np.stack([e[1][lo:hi] for e in events])  # [event][hop]
    rate = np.stack([e[2][lo:hi] for e in events])
    seg = np.zeros(marks.shape, dtype=np.int64)
    for k in range(1, len(events)):
        seg += marks > (p0[k] * (1 + _EPS))[:, None]
    start = np.take_along_axis(p0.T, seg, axis=1)
    r = np.take_along_axis(rate.T, seg, axis=1)
    moved = np.where(marks > start, marks - start, 0.0)
    times = np.where(r > 0, t0[seg] + moved / r + lat[:, None], _INF + lat[:, None])
    return [row.tolist() for row in times]


def _latencies(hops: int, lat_s: float) -> list[float]:
    """Hop j's start cost: j + 1 hop latencies."""
    return [(j + 1) * lat_s for j in range(hops)]


def _segments(
    events: Sequence[tuple[float, Floats, Floats]], flow: int
) -> list[tuple[float, float, float]]:
    return [(t, float(p[flow]), float(r[flow])) for t, p, r in events]
