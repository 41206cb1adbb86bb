"""Cascade methods' plans and node command lines (checked against the node's own parser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade_api.scaleplan import PlanStrategy, ScalePlanSpec
from cascade_bench import methods
from cascade_bench.model import ModelInfo
from cascade_bench.nodeio import BlockInfo
from cascade_bench.params import Params
from cascade_bench.pods import BenchPod
from cascade_bench.steps import StepDir
from cascade_dev.fabric import PodNet


def pods(n: int) -> list[BenchPod]:
    return [
        BenchPod(
            f"bench-{i}",
            f"cascade-node-{i}",
            f"leaf-{i // 4}",
            f"uid{i}",
            PodNet(f"198.18.{i}.2", f"cxp-uid{i}"),
            ("ip", "netns", "exec", f"cxp-uid{i}"),
        )
        for i in range(n)
    ]


def model(nblocks: int = 4) -> ModelInfo:
    rows: list[dict[str, object]] = [
        {"index": i, "layer_start": i, "layer_end": i + 1, "nbytes": 100, "checksum": f"c{i}"}
        for i in range(nblocks)
    ]
    blocks = [BlockInfo(i, 100, f"c{i}") for i in range(nblocks)]
    return ModelInfo(Path("/models/m"), "digest", 100 * nblocks, blocks, rows)


@pytest.mark.parametrize("method", ["chain", "binomial", "unicast"])
def test_plans_cover_every_receiver(method: str) -> None:
    ps = pods(8)
    doc = methods.build_plan(method, ps[:1], ps[1:], model(), Params(methods=("chain",)))
    spec = ScalePlanSpec.model_validate(doc)
    assert spec.targets == [p.name for p in ps[1:]]
    assert [b.index for b in spec.blocks] == [0, 1, 2, 3]
    if method == "binomial":
        assert spec.strategy == PlanStrategy.BINOMIAL and spec.schedule
    else:
        hops = sorted(h for c in spec.chains for h in c.hops)
        assert spec.strategy == PlanStrategy.CHAIN and hops == sorted(spec.targets)
    if method == "unicast":
        assert all(len(c.hops) == 1 and c.source == "bench-0" for c in spec.chains)


def test_launches_parse_with_the_node_cli(tmp_path: Path) -> None:
    node = pytest.importorskip("cascade_worker.multicast.node")
    ps = pods(3)
    step = StepDir(tmp_path).make()
    p = Params(nodes=3, node_env=(("UCX_X", "1"),))
    launches = methods.cascade_launches(step, "chain", ps[:1], ps[1:], model(), p, 256, 99.0)
    assert [la.name for la in launches] == ["bench-0", "bench-1", "bench-2"]
    src, rcv = launches[0], launches[1]
    assert src.prefix == ps[0].prefix and src.env["UCX_X"] == "1"
    args = node.parse_args(list(src.argv[3:]))  # after: python -m module
    assert (args.me, args.model_dir, args.chunk_bytes) == ("bench-0", Path("/models/m"), 256 << 10)
    assert args.deadline_s == 99.0
    assert args.common_start  # the bench times the transfer from one origin
    assert node.parse_args(list(rcv.argv[3:])).receive
    peers = json.loads(args.peers.read_text())
    assert peers["bench-2"].startswith("198.18.2.2:") and args.listen == peers["bench-0"]


def test_fabric_doc_lists_pods() -> None:
    from cascade_dev.topology import plan_cluster

    doc = methods.fabric_doc(plan_cluster(2, nic_mbit=200, spine_mbit=800), pods(2))
    assert doc["spine_mbit"] == 800 and doc["nic_mbit"] == [200]
    assert doc["pods"][1] == {
        "pod": "bench-1", "node": "cascade-node-1", "leaf": "leaf-0", "ip": "198.18.1.2"
    }  # fmt: skip
