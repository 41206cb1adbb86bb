"""Cascade's own methods on the fabric: write the plan and the peer map, launch one
`cascade_worker.multicast.node` per pod.

The node processes run their own common start (the plan's first source is the leader:
it sends `start` once every node has connected and said ready), so these participants
need no ready file; their result times count from that start. Chain and binomial plans
come from `cascade_planner`; unicast is the chain plan rewired (plans.unicast_plan).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from typing import Any

from cascade_bench.model import ModelInfo
from cascade_bench.params import Params
from cascade_bench.plans import blocks_table, host_sources, peer_map, unicast_plan
from cascade_bench.pods import BenchPod
from cascade_bench.procs import Launch
from cascade_bench.steps import StepDir, fresh_port
from cascade_dev.topology import ClusterPlan

NODE_MODULE = "cascade_worker.multicast.node"


def cascade_available() -> bool:
    try:
        return importlib.util.find_spec(NODE_MODULE) is not None
    except ImportError:
        return False


def build_plan(
    method: str,
    sources: Sequence[BenchPod],
    receivers: Sequence[BenchPod],
    model: ModelInfo,
    p: Params,
) -> dict[str, Any]:
    from cascade_planner import plan_spec

    leaf_of = {pod.name: pod.leaf for pod in [*sources, *receivers]}
    strategy = "binomial" if method == "binomial" else "chain"
    spec = plan_spec(
        strategy,
        host_sources([s.name for s in sources]),
        [r.name for r in receivers],
        blocks_table(model.rows),
        deployment="bench",
        model_digest=model.digest,
        k=len(sources),
        leaf_of=leaf_of,
        nic_bytes_per_s=p.nic_mbit * 1e6 / 8,
    )
    if method == "unicast":
        spec = unicast_plan(spec, [s.name for s in sources])
    doc: dict[str, Any] = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return doc


def cascade_launches(
    step: StepDir,
    method: str,
    sources: Sequence[BenchPod],
    receivers: Sequence[BenchPod],
    model: ModelInfo,
    p: Params,
    chunk_kb: int | None,
    deadline_s: float,
) -> list[Launch]:
    pods = [*sources, *receivers]
    plan_json = step.root / "plan.json"
    peers_json = step.root / "peers.json"
    plan_json.write_text(json.dumps(build_plan(method, sources, receivers, model, p), indent=1))
    peers = peer_map({pod.name: pod.net.ip for pod in pods}, fresh_port())
    peers_json.write_text(json.dumps(peers, indent=1))
    out = []
    for pod in pods:
        argv = [
            sys.executable, "-m", NODE_MODULE,
            "--plan", str(plan_json),
            "--me", pod.name,
            "--listen", peers[pod.name],
            "--peers", str(peers_json),
            "--result", str(step.result(pod.name)),
        ]  # fmt: skip
        argv += ["--model-dir", str(model.path)] if pod in sources else ["--receive"]
        argv += ["--ready-timeout-s", str(p.ready_timeout_s), "--deadline-s", str(deadline_s)]
        argv += ["--common-start"]  # the transfer from one origin, set-up before it
        if chunk_kb is not None:
            argv += ["--chunk-bytes", str(chunk_kb * 1024)]
        env = {"POD_IP": pod.net.ip, "OMP_NUM_THREADS": "1", **dict(p.node_env)}
        out.append(Launch(pod.name, argv, step.log(pod.name), pod.prefix, env, None))
    return out


def fabric_doc(plan: ClusterPlan, pods: Sequence[BenchPod]) -> dict[str, Any]:
    """The fabric the numbers were taken on (JSON's "fabric")."""
    return {
        "mode": plan.mode,
        "spine_mbit": plan.spine_mbit,
        "mtu": plan.mtu,
        "nic_mbit": sorted({n.nic_in_mbit for n in plan.nodes}),
        "pods": [
            {"pod": pod.name, "node": pod.node, "leaf": pod.leaf, "ip": pod.net.ip} for pod in pods
        ],
    }
