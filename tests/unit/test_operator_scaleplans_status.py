"""The lifecycle's small steps: worker and plan views, progress, the write throttle,
orders and names."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from operator_fixtures import NOW as T0
from operator_fixtures import worker

from cascade_api import constants as c
from cascade_api import scaleplan as sp
from cascade_operator.observed import PodView
from cascade_operator.weights.orders import transfer_orders
from cascade_operator.weights.plans import PlanView, plan_name, plan_selector
from cascade_operator.weights.progress import PlanPolicy, aggregate, should_patch
from cascade_operator.weights.workers import WorkerView
from cascade_protocol.status import WorkerStatus

POLICY = PlanPolicy()
SPEC = sp.ScalePlanSpec(
    deployment="llama",
    model_digest="m1",
    blocks=[
        sp.Block(index=i, layer_start=i, layer_end=i + 1, bytes=100, checksum="x")
        for i in range(10)
    ],
    sources=[sp.Source(pod="s", tier=sp.SourceTier.GPU)],
    targets=["a", "b"],
    strategy=sp.PlanStrategy.CHAIN,
    chains=[sp.Chain(source="s", hops=["a", "b"])],
)


def pod_body(name: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "creationTimestamp": "2026-11-22T11:00:00Z",
            "labels": {c.LABEL_COMPONENT: c.COMPONENT_HOST_COPY},
        },
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "podIP": "10.1.0.7", **status},
    }


def of(body: dict[str, Any], status: dict[str, Any] | None) -> WorkerView:
    """A worker view from a pod body and its worker's status (snake_case keys)."""
    typed = WorkerStatus.model_validate({"pod": "p"} | status) if status is not None else None
    return WorkerView.of(PodView.of(body), typed)


def w(name: str, **kw: Any) -> WorkerView:
    fields: dict[str, Any] = {"node": "n", "ip": "10.0.0.1", "created": None, "phase": None}
    return worker(name, **(fields | kw))


def test_worker_view_from_pod_and_worker_status() -> None:
    status = {
        "phase": "failed",
        "engine": "off",
        "model_digest": "m1",
        "blocks_loaded": 6,
        "blocks_total": 8,
        "bytes_received": 600,
        "error": "transfer incomplete",
        "last_transfer": {"role": "target", "complete": False, "missing": [6, 7]},
    }
    view = of(pod_body("p"), status)
    assert (view.node, view.ip, view.alive, view.host_copy) == ("n1", "10.1.0.7", True, True)
    assert view.created == datetime(2026, 11, 22, 11, 0, tzinfo=UTC)
    assert view.missing == (6, 7) and view.transfer_complete is False
    assert view.needs_weights and not view.has_model and not view.busy
    assert view.control_address() == f"10.1.0.7:{c.WORKER_PORT}"
    unread = of(pod_body("p"), None)
    assert unread.phase is None and not unread.needs_weights and not unread.complete
    pending = of({"metadata": {"name": "q"}, "status": {"phase": "Pending"}}, None)
    assert pending.starting and not pending.alive
    crashing = pod_body(
        "p", containerStatuses=[{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
    )
    assert not of(crashing, None).alive


def test_plan_view_reads_the_attempt_label() -> None:
    body = {
        "metadata": {"name": "x", "labels": {f"{c.GROUP}/attempt": "3"}},
        "spec": SPEC.to_api(),
        "status": {"phase": "Running"},
    }
    view = PlanView.of(body)
    assert view.attempt == 3 and view.active and view.spec == SPEC and view.created is None
    assert plan_selector("llama") == f"{c.LABEL_DEPLOYMENT}=llama,{c.LABEL_COMPONENT}=scaleplan"


def test_aggregate_counts_only_this_plans_blocks_and_keeps_completion() -> None:
    workers = {
        "a": w("a", phase="ready", model_digest="m1", blocks_loaded=10, blocks_total=10),
        "b": w("b", phase="transferring", model_digest="m1", blocks_loaded=4, bytes_received=400),
    }
    status = aggregate(SPEC, sp.ScalePlanStatus(phase=sp.PlanPhase.RUNNING), workers, T0)
    assert status.progress == "1/2" and status.target_count == 2
    assert [(t.pod, t.blocks_received, t.complete) for t in status.targets] == [
        ("a", 10, True),
        ("b", 4, False),
    ]
    assert status.bytes_moved == 1000 + 400
    # A complete target stays complete in the record when its pod goes away later.
    later = aggregate(SPEC, status, {"b": workers["b"]}, T0 + timedelta(seconds=5))
    assert later.targets[0] == status.targets[0]
    # Blocks of another model (an idle worker holding something else) are not progress.
    other = {"b": w("b", phase="idle", model_digest="m0", blocks_loaded=3)}
    assert aggregate(SPEC, sp.ScalePlanStatus(), other, T0).targets[1].blocks_received == 0


def test_measured_completion_is_the_slowest_targets_own_clock() -> None:
    last = {"role": "target", "complete": True, "complete_s": 2.5, "missing": []}
    held = {"phase": "ready", "model_digest": "m1", "blocks_loaded": 10, "blocks_total": 10}
    a = of(pod_body("a"), held | {"last_transfer": last})
    assert a.transfer_s == 2.5
    sent = {"role": "source", "complete": True, "complete_s": 0.0}
    assert of(pod_body("s"), held | {"last_transfer": sent}).transfer_s is None
    b_busy = w("b", phase="transferring", model_digest="m1", blocks_loaded=4)
    status = aggregate(SPEC, sp.ScalePlanStatus(), {"a": a, "b": b_busy}, T0)
    assert status.targets[0].transfer_seconds == 2.5
    assert status.measured_completion_seconds is None  # b still receives
    b = w("b", phase="ready", model_digest="m1", blocks_loaded=10, blocks_total=10, transfer_s=3.0)
    done = aggregate(SPEC, status, {"a": a, "b": b}, T0)
    assert done.measured_completion_seconds == 3.0
    # A hop that held every block while still forwarding: complete first, measured later.
    forwarding = w("a", phase="transferring", model_digest="m1", blocks_loaded=10, blocks_total=10)
    early = aggregate(SPEC, sp.ScalePlanStatus(), {"a": forwarding, "b": b}, T0)
    assert early.targets[0].complete and early.measured_completion_seconds is None
    assert aggregate(SPEC, early, {"a": a, "b": b}, T0).measured_completion_seconds == 3.0


def test_start_delay_from_the_first_answer_to_the_first_byte() -> None:
    t0 = T0.timestamp()
    running = sp.ScalePlanStatus(phase=sp.PlanPhase.RUNNING, start_time=T0)
    a = w("a", phase="transferring", model_digest="m1", listening_at=t0 - 0.5)
    b = w("b", phase="transferring", model_digest="m1", listening_at=t0 - 0.2)
    status = aggregate(SPEC, running, {"a": a, "b": b}, T0)
    assert status.target_answered_time == T0 - timedelta(seconds=0.5)
    assert status.first_byte_time is None and status.start_delay_seconds is None
    assert should_patch(running, status, SPEC, T0, T0, POLICY)  # a new time: written once
    # b's first bytes land 0.3 s after dispatch: 0.8 s after a, the first, answered.
    b = w("b", phase="transferring", model_digest="m1", first_byte_at=t0 + 0.3)
    later = aggregate(SPEC, status, {"a": a, "b": b}, T0)
    assert later.first_byte_time == T0 + timedelta(seconds=0.3)
    assert later.start_delay_seconds == 0.8
    # A time once recorded only moves earlier; a complete target keeps reporting its own.
    a = w("a", phase="ready", model_digest="m1", blocks_loaded=10, blocks_total=10,
          first_byte_at=t0 + 0.1)  # fmt: skip
    b = w("b", phase="transferring", model_digest="m1", first_byte_at=t0 + 0.9)
    kept = aggregate(SPEC, later, {"a": a, "b": b}, T0)
    assert kept.first_byte_time == T0 + timedelta(seconds=0.1) and kept.start_delay_seconds == 0.6
    # An earlier transfer's first byte (a target an earlier plan failed, before this
    # plan's dispatch or not in this transfer) is not this plan's.
    stale = {
        "a": w("a", phase="failed", model_digest="m1", first_byte_at=t0 + 0.2),
        "b": w("b", phase="transferring", model_digest="m1", first_byte_at=t0 - 3.0),
    }
    assert aggregate(SPEC, running, stale, T0).first_byte_time is None


def progress(a: int, b: int, phase: sp.PlanPhase = sp.PlanPhase.RUNNING) -> sp.ScalePlanStatus:
    targets = [
        sp.TargetProgress(pod="a", blocks_received=a),
        sp.TargetProgress(pod="b", blocks_received=b),
    ]
    return sp.ScalePlanStatus(phase=phase, progress="0/2", targets=targets)


def test_throttle() -> None:
    last = T0
    soon, later = T0 + timedelta(seconds=1), T0 + timedelta(seconds=POLICY.patch_interval_s)

    def check(
        old: sp.ScalePlanStatus, new: sp.ScalePlanStatus, now: datetime, prev: Any = last
    ) -> bool:
        return should_patch(old, new, SPEC, prev, now, POLICY)

    assert not check(progress(3, 0), progress(3, 0), later)  # nothing changed: never
    assert not check(progress(3, 0), progress(4, 0), soon)  # 1 of 20 blocks: 5 % < 10 %
    assert check(progress(3, 0), progress(4, 1), soon)  # 2 of 20: 10 %
    assert check(progress(3, 0), progress(4, 0), later)  # the interval passed
    assert check(progress(3, 0), progress(4, 0), soon, None)  # after a restart: once
    assert check(progress(3, 0), progress(3, 0, sp.PlanPhase.FAILED), soon)  # a phase change
    done = progress(10, 0).model_copy(update={"progress": "1/2"})
    assert check(progress(9, 0), done, soon)  # a target completed


def test_transfer_orders_are_all_or_nothing() -> None:
    ready = {p: w(p, ip=f"10.0.0.{i}", phase="idle") for i, p in enumerate(["s", "a", "b"])}
    orders = transfer_orders("plan-1", SPEC, ready)
    assert orders is not None and [o.pod for o in orders] == ["s", "a", "b"]
    body = orders[1].body()
    assert sp.ScalePlanSpec.model_validate(body["plan"]) == SPEC
    assert body["peers"] == {p: f"10.0.0.{i}:{c.DATA_PORT}" for i, p in enumerate("sab")}
    assert transfer_orders("plan-1", SPEC, {**ready, "b": w("b", ip=None)}) is None
    assert transfer_orders("plan-1", SPEC, {"s": ready["s"], "a": ready["a"]}) is None


def test_plan_names_are_deterministic() -> None:
    one = plan_name("llama", 4, "m1", ["b", "a"], [])
    assert one == plan_name("llama", 4, "m1", ["a", "b"], [])
    assert one.startswith("llama-g4-") and len(one) == len("llama-g4-") + 8
    assert plan_name("llama", 4, "m1", ["a"], []) != one
    assert plan_name("llama", 4, "m1", ["a", "b"], [one, f"{one}-2"]) == f"{one}-3"
    assert len(plan_name("x" * 300, 1, "m", ["a"], [])) <= 253
