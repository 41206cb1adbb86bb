"""Max-min fair rates of whole chains: flow.max_min_rates, specialised for predict_chains.

Why: at 512 targets a chain prediction re-shares ~500 hops over ~1,000 links once per
chain, and the general routine rebuilt its link users and hop children at every call
and froze hops one stack entry at a time: half of the prediction. Two facts of chains
make it cheaper: a chain is re-shared as a whole, and freezing hop j freezes every later
hop of its chain (each is capped by the one before), so the hops still rising in a chain
are always a prefix, and a freeze only moves that prefix's end. Same progressive
filling, same sums in the same order, so the same floats as flow.max_min_rates with
`upstream` = the hop before (tests/unit/test_planner_fastpaths.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

_EPS = 1e-9


def link_users(paths: Sequence[Sequence[int]]) -> dict[int, list[int]]:
    """Link id -> the flows crossing it (a flow crossing it twice: listed twice)."""
    users: dict[int, list[int]] = {}
    for f, path in enumerate(paths):
        for link in path:
            users.setdefault(link, []).append(f)
    return users


def chain_rates(
    live: Sequence[int],
    first: Sequence[int],
    chain_of: Sequence[int],
    paths: Sequence[Sequence[int]],
    users: Mapping[int, Sequence[int]],
    caps: Sequence[float],
) -> list[float]:
    """Rates of the hops of the `live` chains, in that order (chain c's hops are flows
    first[c]..first[c+1]-1, each capped by the one before it; `chain_of[f]`: f's chain)."""
    end = {c: first[c + 1] for c in live}  # where each chain's rising prefix ends
    rate: dict[int, float] = {}
    count: dict[int, int] = {}  # rising flows per link
    for c in live:
        for f in range(first[c], first[c + 1]):
            for link in paths[f]:
                count[link] = count.get(link, 0) + 1
    links = list(count)
    rem = {link: caps[link] for link in links}
    left = sum(first[c + 1] - first[c] for c in live)
    level = 0.0
    while left:
        if not links:  # flows without links are unconstrained
            for c in live:
                for f in range(first[c], end[c]):
                    rate[f] = float("inf")
            break
        delta = min([rem[link] / count[link] for link in links])
        level += delta
        full = []
        for link in links:
            rem[link] -= delta * count[link]
            if rem[link] <= _EPS * caps[link]:
                full.append(link)
        cut: dict[int, int] = {}  # chain -> its first hop to freeze now
        for link in full:
            for f in users[link]:
                c = chain_of[f]
                if f < cut.get(c, end.get(c, -1)):  # rising: a live chain's prefix
                    cut[c] = f
        for c, start in cut.items():
            for f in range(start, end[c]):
                rate[f] = level
                for link in paths[f]:
                    count[link] -= 1
            left -= end[c] - start
            end[c] = start
        links = [link for link in links if count[link]]
    return [rate[f] for c in live for f in range(first[c], first[c + 1])]
