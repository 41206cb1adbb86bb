"""cascade_sim's model, tick by tick: the fluid instance against hand-computed times, the
gateway's priority and role routing, preemption, the capacity curve and the local
autoscaler on a simulated instance."""

from __future__ import annotations

from typing import Any

import pytest

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_sim import policies
from cascade_sim.config import Deployment, SimConfig, Slo, from_spec
from cascade_sim.gateway import Gateway
from cascade_sim.instance import Instance
from cascade_sim.metrics import class_summary
from cascade_sim.policies import FixedPolicy
from cascade_sim.profile import CapacityProfile, CurvePoint, from_document
from cascade_sim.sim import simulate
from cascade_sim.workload import Arrival, Req

# step(1) = 1/100 s, step(2) = 2/150 s: easy to compute by hand.
TWO = CapacityProfile((CurvePoint(1, 100.0), CurvePoint(2, 150.0)))
# The measured tiny-llama curve at 0.5 core per node (64 output tokens).
TINY = CapacityProfile(
    tuple(CurvePoint(b, t) for b, t in ((1, 154.0), (8, 340.0), (32, 778.0), (128, 979.0)))
)


def deployment(max_batch: int = 64, itl_ms: int = 200, **scaling: Any) -> Deployment:
    spec: dict[str, Any] = {
        "model": {"uri": "file:///m"},
        "replicas": scaling.pop("replicas", 1),
        "engine": {"maxBatchSize": max_batch},
        "slo": {"interactive": {"ttftMs": 2000, "itlMs": itl_ms}},
    }
    if scaling:
        spec["scaling"] = scaling
    return from_spec(ModelDeploymentSpec.model_validate(spec))


def run_fixed(
    arrivals: list[Arrival], dep: Deployment, profile: CapacityProfile, **cfg: Any
) -> list[Req]:
    cfg.setdefault("local", "fixed")
    cfg.setdefault("prefill_tokens_per_s", 1000.0)
    res = simulate(arrivals, dep, profile, FixedPolicy("fixed", dep.replicas), SimConfig(**cfg))
    return sorted(res.requests, key=lambda r: r.index)


def test_fluid_decode_matches_hand_computed_times() -> None:
    """A alone, then B's prefill slows A's steps, then both decode at batch 2, then A alone."""
    a = Arrival(0, 0.0, 10, 11, False)  # 10-token prefill, then 10 decode tokens
    b = Arrival(1, 0.05, 10, 3, False)
    ra, rb = run_fixed([a, b], deployment(), TWO)
    # A: prefill 10 tokens at 1000 tok/s with nothing decoding.
    assert ra.first == pytest.approx(0.01)
    # B's prefill shares a step with A's decode: step(1) + 10/1000 = 0.02 s, one step.
    assert rb.first == pytest.approx(0.07)
    # Both decode at step(2) = 2/150 s; B needs 2 more tokens.
    assert rb.finished == pytest.approx(0.07 + 2 * 2 / 150)
    # A: 4 tokens by 0.05, 1 during B's prefill, 2 with B, the last 3 alone at 0.01 s.
    assert ra.finished == pytest.approx(0.07 + 2 * 2 / 150 + 3 * 0.01)
    assert ra.mean_itl_s == pytest.approx((ra.finished - ra.first) / 10)


def test_interactive_is_served_before_batch_that_waited_longer() -> None:
    a = Arrival(0, 0.0, 1, 50, False)
    b = Arrival(1, 0.001, 1, 5, True)  # batch arrives first
    c = Arrival(2, 0.002, 1, 5, False)
    ra, rb, rc = run_fixed([a, b, c], deployment(max_batch=1), TWO, slack=0)
    assert rc.dispatched == pytest.approx(ra.finished)
    assert rb.dispatched > rc.dispatched
    assert rc.first < rb.first


def test_interactive_preempts_batch_on_a_full_instance() -> None:
    """With the slack slot taken by an interactive request, the engine preempts batch:
    the batch request recomputes its prompt + generated tokens, then resumes."""
    a = Arrival(0, 0.0, 10, 100, True)
    b = Arrival(1, 0.5, 10, 5, False)
    ra, rb = run_fixed([a, b], deployment(max_batch=1), TWO, slack=1)
    assert ra.preempted == 1
    doc = class_summary([ra], Slo(ttft_s=1.0, itl_s=None))
    assert doc["preempted"] == 1 and doc["completed"] == 1 and doc["attainment"] == 1.0
    assert rb.first == pytest.approx(0.5 + 0.01)  # runs at once: prefill alone
    # A had 49 decode tokens at 0.5 (first at 0.01); it re-prefills 10 + 50 tokens after B.
    resumed = rb.finished + (10 + 50) / 1000
    assert ra.finished == pytest.approx(resumed + 50 * 0.01)
    assert ra.first == pytest.approx(0.01)


def gateway(routing: str = "gateway") -> Gateway:
    return Gateway(routing, slack=2, limits=(256, 4096), timeout_s=600)  # type: ignore[arg-type]


def inst(iid: int, role: str, inflight: int = 0, cap: int = 4) -> Instance:
    i = Instance(iid, role, 0.0, 0.0, cap, TWO.step_table(8), 1000.0, 512)
    i.inflight = inflight
    return i


def test_routing_own_role_then_mixed_free_slots_before_slack() -> None:
    gw = gateway()
    interactive, mixed, batch = inst(0, "interactive", 3), inst(1, "mixed", 0), inst(2, "batch")
    serving = [interactive, mixed, batch]
    assert gw.pick(serving, batch=False) is interactive  # own role while a slot is free
    interactive.inflight = 4  # batch full: a free mixed slot beats a slack slot
    assert gw.pick(serving, batch=False) is mixed
    mixed.inflight = 4
    assert gw.pick(serving, batch=False) is interactive  # slack, least loaded: tie -> older
    interactive.inflight = mixed.inflight = 6
    assert gw.pick(serving, batch=False) is None  # never the batch instance
    assert gw.pick(serving, batch=True) is batch


def test_batch_gets_only_spare_room_of_mixed_and_falls_back_without_its_roles() -> None:
    gw = gateway()
    mixed, batch = inst(0, "mixed", 3), inst(1, "batch", 5)
    assert gw.pick([mixed, batch], batch=True) is mixed  # free slot under the cap first
    mixed.inflight = 4
    assert gw.pick([mixed, batch], batch=True) is batch  # its slack slot, not mixed's
    batch.inflight = 6
    assert gw.pick([mixed, batch], batch=True) is None
    only_interactive = [inst(0, "interactive", 1)]
    assert gw.pick(only_interactive, batch=True) is only_interactive[0]  # fallback


def test_pack_fills_the_oldest_instance_first() -> None:
    a, b = inst(0, "interactive", 2), inst(1, "interactive", 0)
    assert gateway("gateway").pick([a, b], batch=False) is b
    assert gateway("pack").pick([a, b], batch=False) is a


def test_queue_limit_rejects_and_client_timeout_drops() -> None:
    gw = Gateway("gateway", slack=0, limits=(1, 1), timeout_s=10.0)
    r1, r2 = Req(Arrival(0, 0.0, 1, 1, False), 60.0), Req(Arrival(1, 0.0, 1, 1, False), 60.0)
    assert gw.arrive(r1) and not gw.arrive(r2) and r2.rejected
    assert gw.pop_live(False, 5.0) is r1
    assert gw.pop_live(False, 11.0) is None and r1.timed_out


def test_queue_serves_requests_still_on_time_before_late_ones() -> None:
    """The gateway's rule (cascade_protocol.queue_order), with the interactive TTFT 5 s."""
    gw = Gateway("gateway", slack=0, limits=(9, 9), timeout_s=60.0, ttft_slos_s=(5.0, 60.0))
    old, mid, new = (Req(Arrival(i, t, 1, 1, False), 60.0) for i, t in enumerate((0, 1, 4)))
    for r in (old, mid, new):
        assert gw.arrive(r)
    assert gw.pop_live(False, 4.4) is old  # all on time: first come first served
    assert gw.pop_live(False, 5.4) is mid  # old is late (from 4.5 s with the 10 % margin)
    gw.queue(False).take(mid)
    assert gw.pop_live(False, 6.0) is new
    gw.queue(False).take(new)
    assert gw.pop_live(False, 7.0) is old and len(gw.q_i) == 1
    assert list(gw.q_i) == [old]


def test_profile_interpolates_tokens_per_s_and_extends_flat() -> None:
    assert TINY.tokens_per_s(8) == pytest.approx(340.0)
    assert TINY.tokens_per_s(20) == pytest.approx(340 + (778 - 340) * 12 / 24)
    assert TINY.tokens_per_s(256) == pytest.approx(979.0)
    assert TINY.step_s(256) == pytest.approx(256 / 979)
    assert TINY.tokens_per_s(0.5) == pytest.approx(77.0)  # proportional below the first
    # step(12) = 12 / 413 tok/s = 29.1 ms; step(13) = 13 / 431 = 30.2 ms
    assert TINY.batch_for_itl(0.1, 64) == 64 and TINY.batch_for_itl(0.03, 64) == 12
    doc = {"model": "m", "node_cpu": 0.5, "curve": [{"batch": 2, "tokens_per_s": 9.0}]}
    assert from_document(doc).points == (CurvePoint(2, 9.0),)
    assert from_document(doc).prefill_tokens_per_s == 9.0  # not measured: the decode peak
    measured = from_document({**doc, "prefill": {"tokens_per_s": 1000.0}})
    assert measured.prefill_tokens_per_s == 1000.0
    with pytest.raises(ValueError, match="prefill"):
        from_document({**doc, "prefill": {"tokens_per_s": -1}})
    with pytest.raises(ValueError, match="curve"):
        from_document({"curve": []})
    with pytest.raises(ValueError, match="tokens_per_s"):
        from_document({"curve": [{"batch": 1, "tokens_per_s": 0}]})


def test_only_cascade_and_fixed_local_run_the_local_controller_by_default() -> None:
    """`local="auto"`: the cap moves under the policies of LOCAL_CONTROL when the engine's
    adaptiveBatch is on (the default), and stays at the engine's max under the others."""
    dep = deployment(max_batch=64, itl_ms=30, minReplicas=1, maxReplicas=1)
    arrivals = [Arrival(i, i * 0.02, 4, 200, False) for i in range(300)]

    def least_cap(policy: str) -> float:
        res = simulate(arrivals, dep, TINY, policies.make(policy, dep), SimConfig())
        return min(row["mean_cap"] for row in res.timeline if row["mean_cap"])

    assert least_cap("fixed_local") <= 16 and least_cap("cascade") <= 16
    assert least_cap("fixed_max") == 64


def test_local_autoscaler_cuts_the_cap_when_itl_breaks_the_slo() -> None:
    """At the engine's 64 the step is 76 ms; an ITL SLO of 30 ms brings the cap down."""
    dep = deployment(max_batch=64, itl_ms=30)
    arrivals = [Arrival(i, i * 0.02, 4, 200, False) for i in range(500)]
    res = simulate(arrivals, dep, TINY, FixedPolicy("fixed", 1), SimConfig(local="adaptive"))
    caps = [row["mean_cap"] for row in res.timeline]
    assert caps[0] < 64 and min(caps) <= 16
    assert all(TINY.step_s(int(c)) < 0.06 for c in caps[len(caps) // 2 :])
