"""Seeded random fabrics and plan requests for the planner's property tests.

Each seed gives one case: up to 300 nodes in leaves, zones (with and without a zone
uplink limit), NVLink cliques, mixed or missing NIC labels, a spine limit or
oversubscription, pods packed several to a node or one per node (and one pod on no
known node), uniform or mixed block sizes, busy sources, k, shifted orders, hop
latency, live-scaling stages, host copies, and a paced fabric now and then.
"""

from __future__ import annotations

import random
from typing import Any

from cascade_api import constants as c
from cascade_api.scaleplan import Block, Source, SourceTier
from cascade_planner import FabricParams, PlanRequest, Topology, topology_from_nodes
from cascade_planner.topology import send_capped


def random_nodes(rng: random.Random, n: int) -> list[dict[str, Any]]:
    leaf, zones = rng.choice([2, 4, 8, 32]), rng.choice([1, 1, 2, 3])
    out: list[dict[str, Any]] = []
    clique, left = 0, 0
    for i in range(n):
        if left == 0:
            clique, left = clique + 1, rng.randint(1, 4)
        left -= 1
        labels = {c.LABEL_LEAF: f"L{i // leaf}", c.LABEL_ZONE: f"z{(i // leaf) % zones}"}
        if rng.random() < 0.7:
            labels[c.LABEL_NVLINK_CLIQUE] = f"q{clique}"
        if rng.random() < 0.8:
            nic = rng.choice([25_000, 100_000, 200_000, 400_000])
            labels[c.LABEL_NIC_IN_MBIT] = str(nic)
            labels[c.LABEL_NIC_OUT_MBIT] = str(rng.choice([nic, nic // 2]))
        if rng.random() < 0.02:
            labels[c.LABEL_NIC_OUT_MBIT] = "fast"  # a warning, and the default rate
        out.append({"metadata": {"name": f"n{i}", "labels": labels}})
    rng.shuffle(out)
    return out


def random_params(rng: random.Random) -> FabricParams:
    return FabricParams(
        spine_mbit=rng.choice([None, None, 50_000, 400_000]),
        oversubscription=rng.choice([1.0, 1.0, 2.0, 3.0]),
        zone_mbit=rng.choice([None, None, 100_000]),
    )


def random_case(seed: int, strategy: str | None = None) -> tuple[PlanRequest, Topology]:
    rng = random.Random(seed)
    n = rng.choice([4, 8, 16, 40, 100, 300])
    topo = topology_from_nodes(random_nodes(rng, n), random_params(rng))
    if rng.random() < 0.2:
        topo = send_capped(topo, rng.choice([10_000, 50_000]))
    npods = rng.randint(2, min(70, 3 * n))
    pods = [f"p{i}" for i in range(npods)]
    packed = rng.random() < 0.4
    pod_node = {p: f"n{rng.randrange(n) if packed else i % n}" for i, p in enumerate(pods)}
    if rng.random() < 0.1:
        pod_node.pop(pods[-1])  # a pod on no known node: a node of its own name
    ns = rng.randint(1, min(6, npods - 1))
    b = rng.choice([1, 2, 3, 8, 16, 32])
    uniform = rng.random() < 0.5

    def size() -> int:
        if rng.random() < 0.2:
            return rng.choice([1 << 20, 4096])
        return 10**8 if uniform else rng.randint(10**6, 10**9)

    request = PlanRequest(
        deployment="d",
        model_digest="m",
        blocks=[
            Block(index=i, layer_start=2 * i, layer_end=2 * i + 2, bytes=size(), checksum="x")
            for i in range(b)
        ],
        sources=[
            Source(pod=p, tier=rng.choice([SourceTier.GPU, SourceTier.GPU, SourceTier.HOST]))
            for p in pods[:ns]
        ],
        targets=pods[ns:],
        pod_node=pod_node,
        strategy=strategy or rng.choice(["chain", "binomial", "auto"]),
        k=rng.choice([None, None, 1, 2]),
        serving_out={p: rng.choice([0.0, 0.3, 0.6, 1.0]) for p in pods[:ns] if rng.random() < 0.3},
        shift=rng.random() < 0.3,
        chunk_bytes=rng.choice([1 << 20, 1 << 16, 1 << 24]),
        hop_latency_s=rng.choice([0.0, 0.0, 1e-4, 1e-2]),
        source_stages=rng.random() < 0.3,
        cooperative=rng.random() < 0.2,
        stageless=[p for p in pods[ns:] if rng.random() < 0.1],
    )
    return request, topo
