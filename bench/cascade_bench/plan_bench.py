"""`cascade bench plan`: how long the planner takes to decide, on synthetic clusters.

Clusters: n nodes with one pod each, leaves of 32 nodes (two zones when n >= 1,000),
NVLink cliques of 1-8 consecutive nodes drawn at random inside a leaf, NIC rates drawn
from 100/200/400 Gbit/s. Sources: 4 random pods; targets: t other random pods. Model:
32 blocks of 500 MB (16 GB). Every case is seeded, so runs compare.

Per case it measures, as the median of `repeat` runs on one warm process:
  topo_ms   building the Topology from the Node dicts in one go (`topology_from_nodes`,
            all n nodes);
  event_ms  one node event applied to a `TopologyIndex` of the n nodes instead (median
            of EVENTS events: a node relabelled to another leaf and NIC rate, removed,
            added back), with `index_ms` (building the index) and `snapshot_ms` (a copy
            for planning on another thread);
  plan_ms   `plan()` for one strategy on that topology: validation, pruning, plan
            construction, the flow-model prediction and pipeline formation (auto: the
            chain plan, the binomial plan's exact completion, the winner in full). This
            is the number the ≤ 20 ms (1,000 nodes) and ≤ 50 ms (10,000) targets refer to.
It prints a table and returns {"cases": [{nodes, targets, strategy, plan_ms, ...}]};
the topology keys repeat on every case of a node count.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

from cascade_api import constants as c
from cascade_api.scaleplan import Block, Source, SourceTier
from cascade_planner import PlanRequest, plan, topology_from_nodes
from cascade_planner.topology_index import TopologyIndex

NODES = (100, 1_000, 10_000)
TARGETS = (8, 64, 512)
STRATEGIES = ("chain", "binomial", "auto")
LEAF_SIZE = 32
SOURCES = 4
BLOCKS = 32
BLOCK_BYTES = 500_000_000
EVENTS = 300  # node events timed per node count (a third of each kind)


def synthetic_nodes(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Node objects (dicts as the API returns them) with topology labels."""
    rng = random.Random(seed)
    zones = 2 if n >= 1_000 else 1
    nodes: list[dict[str, Any]] = []
    clique, left = 0, 0
    for i in range(n):
        leaf = i // LEAF_SIZE
        if left == 0 or i % LEAF_SIZE == 0:  # cliques stay inside a leaf
            clique, left = clique + 1, rng.randint(1, 8)
        left -= 1
        nic = rng.choice((100_000, 200_000, 400_000))
        labels = {
            c.LABEL_ZONE: f"zone-{leaf % zones}",
            c.LABEL_LEAF: f"leaf-{leaf}",
            c.LABEL_NVLINK_CLIQUE: f"clique-{clique}",
            c.LABEL_GPU_PRODUCT: "NVIDIA-H100-80GB-HBM3",
            c.LABEL_NIC_IN_MBIT: str(nic),
            c.LABEL_NIC_OUT_MBIT: str(nic),
        }
        nodes.append({"metadata": {"name": f"node-{i}", "labels": labels}})
    return nodes


def request(n: int, targets: int, strategy: str, seed: int = 0) -> PlanRequest:
    rng = random.Random(seed * 7919 + n + targets)
    picked = rng.sample(range(n), SOURCES + targets)
    pods = [f"pod-{i}" for i in picked]
    blocks = [
        Block(index=i, layer_start=i, layer_end=i + 1, bytes=BLOCK_BYTES, checksum=f"c{i}")
        for i in range(BLOCKS)
    ]
    return PlanRequest(
        deployment="bench",
        model_digest="sha256:bench",
        blocks=blocks,
        sources=[Source(pod=p, tier=SourceTier.GPU) for p in pods[:SOURCES]],
        targets=pods[SOURCES:],
        pod_node={f"pod-{i}": f"node-{i}" for i in picked},
        strategy=strategy,
        serving_out={pods[0]: 0.3},
    )


def _ms(fn: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out


def node_events(raw: list[dict[str, Any]], count: int = EVENTS, seed: int = 0) -> dict[str, float]:
    """Median ms per node event on an index of `raw`: relabel, remove, add back."""
    rng = random.Random(seed)
    index = TopologyIndex(raw)
    times: list[float] = []
    leaves = max(1, len(raw) // LEAF_SIZE)
    for _ in range(count // 3):
        node = raw[rng.randrange(len(raw))]
        moved = dict(node["metadata"]["labels"])
        moved[c.LABEL_LEAF] = f"leaf-{rng.randrange(leaves)}"
        moved[c.LABEL_NIC_IN_MBIT] = str(rng.choice((100_000, 200_000, 400_000)))
        relabelled = {"metadata": {"name": node["metadata"]["name"], "labels": moved}}
        for kind, body in (("relabel", relabelled), ("remove", node), ("add", node)):
            t0 = time.perf_counter()
            if kind == "remove":
                index.remove_node(body["metadata"]["name"])
            else:
                index.add_node(body)
            times.append((time.perf_counter() - t0) * 1e3)
    return {"event_ms": statistics.median(times), "event_max_ms": max(times)}


def _fabric(raw: list[dict[str, Any]], repeat: int) -> dict[str, float]:
    """Index build, snapshot and node-event times; the index is dropped (and its garbage
    collected) before plans are timed, so they run with one fabric in memory, as before."""
    index_ms, index = _ms(lambda: TopologyIndex(raw), repeat)
    snapshot_ms, _ = _ms(index.snapshot, repeat)
    out = {"index_ms": round(index_ms, 3), "snapshot_ms": round(snapshot_ms, 3)}
    out.update({k: round(v, 4) for k, v in node_events(raw).items()})
    del index
    gc.collect()
    return out


def run(
    nodes: Sequence[int] = NODES,
    targets: Sequence[int] = TARGETS,
    strategies: Sequence[str] = STRATEGIES,
    repeat: int = 5,
) -> dict[str, Any]:
    cases: list[dict[str, Any]] = []
    for n in nodes:
        raw = synthetic_nodes(n)
        topo_ms, topo = _ms(lambda raw=raw: topology_from_nodes(raw), repeat)
        fabric = _fabric(raw, repeat)
        for t in targets:
            if SOURCES + t > n:
                continue
            for s in strategies:
                req = request(n, t, s)
                plan_ms, spec = _ms(lambda req=req, topo=topo: plan(req, topo), repeat)
                cases.append(
                    {
                        "nodes": n,
                        "targets": t,
                        "strategy": s,
                        "plan_ms": round(plan_ms, 3),
                        "topo_ms": round(topo_ms, 3),
                        "chosen": str(spec.strategy),
                        "predicted_s": round(spec.predicted_completion_seconds or 0.0, 4),
                        "pipelines": len(spec.execution_pipelines),
                        **fabric,
                    }
                )
    return {"repeat": repeat, "sources": SOURCES, "blocks": BLOCKS, "cases": cases}


def table(doc: dict[str, Any]) -> str:
    head = f"{'nodes':>6} {'targets':>7} {'strategy':>9} {'plan_ms':>9} {'topo_ms':>8}"
    head += f" {'event_ms':>8} {'chosen':>9} {'predicted_s':>11} {'pipelines':>9}"
    rows = [head]
    for r in doc["cases"]:
        rows.append(
            f"{r['nodes']:>6} {r['targets']:>7} {r['strategy']:>9} {r['plan_ms']:>9.2f} "
            f"{r['topo_ms']:>8.2f} {r['event_ms']:>8.3f} {r['chosen']:>9} "
            f"{r['predicted_s']:>11.3f} {r['pipelines']:>9}"
        )
    return "\n".join(rows)
