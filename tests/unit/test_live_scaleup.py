"""Live scale-ups, the pure parts: who sits where in a plan's pipelines, what the
transfer order carries (liveScaling, the sending pace) and how the planner sees a pace."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

from cascade_api.scaleplan import (
    Block,
    Chain,
    ExecutionPipeline,
    PlanStrategy,
    ScalePlanSpec,
    Source,
    SourceTier,
    Stage,
)
from cascade_operator.weights.orders import TransferOrder
from cascade_planner import PlanRequest, plan, topology_from_nodes
from cascade_planner.topology import BYTES_PER_MBIT, send_capped
from cascade_protocol.control import TransferRequest
from cascade_protocol.peer_auth import PeerKey
from cascade_worker.control.jobs import node_options
from cascade_worker.multicast.runner import NodeOptions
from cascade_worker.serving.live import LiveScaleUp, Prepared
from cascade_worker.serving.live_plan import Seat, covers, seat_for, stage_address

BLOCKS = [
    Block(index=i, layer_start=2 * i, layer_end=2 * i + 2, bytes=8_000_000, checksum="x")
    for i in range(4)
]


def live_plan() -> ScalePlanSpec:
    return ScalePlanSpec(
        deployment="m",
        model_digest="d",
        blocks=BLOCKS,
        sources=[Source(pod="w0", tier=SourceTier.GPU)],
        targets=["w1", "w2", "w3"],
        strategy=PlanStrategy.CHAIN,
        chains=[Chain(source="w0", hops=["w1", "w2", "w3"])],
        execution_pipelines=[
            ExecutionPipeline(
                stages=[
                    Stage(pod="w1", layer_start=0, layer_end=4),
                    Stage(pod="w0", layer_start=4, layer_end=8),
                ],
                ready_seconds=1.0,
            )
        ],
    )


def test_each_member_finds_its_seat_and_the_rest_none() -> None:
    spec = live_plan()
    assert seat_for(spec, "w1") == Seat(("w1", "w0"), 0, (0, 4))
    assert seat_for(spec, "w1").is_head  # type: ignore[union-attr]
    source = seat_for(spec, "w0")
    assert source == Seat(("w1", "w0"), 1, (4, 8)) and not source.is_head
    assert seat_for(spec, "w2") is None and seat_for(spec, "nobody") is None


def test_a_stage_joins_once_one_held_run_contains_its_layers() -> None:
    assert covers([(0, 4)], (0, 4)) and covers([(0, 6)], (2, 4))
    assert not covers([(0, 2), (2, 4)][:1], (0, 4))
    assert not covers([(0, 2), (6, 8)], (0, 4)) and not covers([], (0, 1))


def test_the_head_reaches_a_stage_at_the_plan_host_and_the_listening_port() -> None:
    assert stage_address("10.1.0.7:18515", "0.0.0.0:18516") == "10.1.0.7:18516"
    assert stage_address("10.1.0.7:18515", "10.1.0.7:40001") == "10.1.0.7:40001"


def test_the_transfer_order_carries_live_scaling_and_the_pace() -> None:
    order = TransferOrder(
        "p", "w1", "10.0.0.2:8080", live_plan(), {"w1": "x:1"}, live=True, send_mbit=16
    )
    body = order.body()
    assert body["live"] is True and body["sendBytesPerS"] == 16 * BYTES_PER_MBIT
    req = TransferRequest.model_validate(body)
    assert req.live and not req.cooperative and req.send_bytes_per_s == 2_000_000
    paired = TransferOrder("p", "w1", "a:1", live_plan(), {}, live=True, cooperative=True)
    assert TransferRequest.model_validate(paired.body()).cooperative
    off = TransferOrder("p", "w1", "a:1", live_plan(), {}, live=False, cooperative=True)
    assert "cooperative" not in off.body()  # cooperation needs live scaling
    plain = TransferOrder("p", "w1", "10.0.0.2:8080", live_plan(), {"w1": "x:1"}).body()
    assert "live" not in plain and "sendBytesPerS" not in plain  # defaults stay off the wire


def test_the_worker_paces_its_node_as_ordered() -> None:
    assert node_options(None, None, None) == NodeOptions()
    mine = NodeOptions(depth=2)
    assert node_options(mine, None, None) is mine
    assert node_options(mine, 2e6, None) == NodeOptions(depth=2, rate_bytes_per_s=2e6)
    assert node_options(None, 5e5, None) == NodeOptions(rate_bytes_per_s=5e5)
    key = PeerKey("t" * 43)
    assert node_options(mine, None, key) == NodeOptions(depth=2, key=key)


def nodes(n: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"n{i}"}} for i in range(n)]


def test_a_paced_fabric_predicts_the_paced_transfer() -> None:
    topo = topology_from_nodes(nodes(4))
    request = PlanRequest(
        deployment="d",
        model_digest="m",
        blocks=BLOCKS,
        sources=[Source(pod="n0", tier=SourceTier.GPU)],
        targets=["n1", "n2", "n3"],
        strategy="chain",
    )
    fast = plan(request, topo).predicted_completion_seconds
    slow = plan(request, send_capped(topo, 16)).predicted_completion_seconds
    assert fast is not None and slow is not None
    # 32 MB at 2 MB/s, plus the fill of a 3-hop cut-through chain (1 MiB chunks).
    assert 16.0 < slow < 18.0 and fast < 1.0
    assert send_capped(topo, None) is topo


class RacingServing:
    """A Serving double whose head start takes a while: the blocks complete meanwhile."""

    def __init__(self) -> None:
        self.config = SimpleNamespace(pod_name="w1", port=8080)
        self.store = SimpleNamespace(complete=lambda: self.complete, manifest=None)
        self.state = SimpleNamespace(current_store=lambda: self.store)
        self.complete = False
        self.head: object | None = None
        self.engine: object | None = None
        self.starting = False
        self.started = asyncio.Event()
        self.switched = False

    def claim(self, layers: tuple[int, int] | None = None) -> object:
        self.starting = True
        return self.store

    def options(self) -> None:
        return None

    async def start_head(self, store: object, options: None, end: int, *rest: object) -> bool:
        self.started.set()
        await asyncio.sleep(0.05)  # building the engine over the prepared head
        self.starting, self.head, self.engine = False, rest[1], SimpleNamespace(stopped=False)
        return True

    async def switch_to_local(self, store: object) -> bool:
        self.switched = True
        return True


def test_blocks_completing_while_the_head_starts_switch_the_started_head_to_local() -> None:
    """CI once had a head adopt stages that `_alone`, run meanwhile, had just detached:
    the head never served (its pipeline broken) and never switched to local execution."""

    async def scenario() -> tuple[RacingServing, list[str]]:
        serving = RacingServing()
        req = SimpleNamespace(peers={}, plan=live_plan(), cooperative=False)
        live = LiveScaleUp(serving, req, asyncio.ensure_future)  # type: ignore[arg-type]
        closed: list[str] = []
        prepared = SimpleNamespace(close=lambda: closed.append("stages detached"), seconds=0.1)
        done: asyncio.Future[Prepared | None] = asyncio.get_running_loop().create_future()
        done.set_result(Prepared(["x:1"], 0.0, prepared))  # type: ignore[arg-type]
        live.preparing = done  # type: ignore[assignment]

        async def no_hand_back() -> None:
            return None

        live._hand_back = no_hand_back  # type: ignore[method-assign]
        seat = live.seat
        assert seat is not None
        heading = asyncio.ensure_future(live._head(seat, time.time()))
        await serving.started.wait()
        serving.complete = True  # the last block lands while the head starts
        await live._alone()
        await heading
        return serving, closed

    serving, closed = asyncio.run(scenario())
    assert serving.head is not None and serving.switched
    assert closed == []  # the stages the head took stayed attached until it left them
