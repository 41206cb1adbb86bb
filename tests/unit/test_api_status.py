"""Status plumbing: conditions keep honest transition times, ScalePlans survive the wire.

`kubectl describe` tells how long a state has held from lastTransitionTime, so it must
only move when a condition's status flips. ScalePlans are written by the operator and
read back by workers, so spec and status must round-trip through the API dict exactly.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from cascade_api import scaleplan as sp
from cascade_api.base import Condition, ConditionStatus, set_condition, utcnow
from cascade_api.modeldeployment import ModelDeploymentStatus

T0 = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def cond(type_: str, status: ConditionStatus, reason: str = "R") -> Condition:
    return Condition(type=type_, status=status, reason=reason, message=f"{type_} is {status}")


def test_new_condition_gets_now() -> None:
    out = set_condition([], cond("Available", ConditionStatus.TRUE), T0)
    assert [(c.type, c.last_transition_time) for c in out] == [("Available", T0)]


def test_unchanged_status_keeps_transition_time_but_updates_the_rest() -> None:
    first = set_condition([], cond("Available", ConditionStatus.FALSE, "Loading"), T0)
    again = set_condition(first, cond("Available", ConditionStatus.FALSE, "StillLoading"), T1)
    assert again[0].last_transition_time == T0
    assert again[0].reason == "StillLoading"


def test_flipped_status_moves_transition_time() -> None:
    first = set_condition([], cond("Available", ConditionStatus.FALSE), T0)
    flipped = set_condition(first, cond("Available", ConditionStatus.TRUE), T1)
    assert flipped[0].status == ConditionStatus.TRUE
    assert flipped[0].last_transition_time == T1


def test_missing_old_transition_time_is_filled() -> None:
    old = [cond("Degraded", ConditionStatus.FALSE)]
    out = set_condition(old, cond("Degraded", ConditionStatus.FALSE), T1)
    assert out[0].last_transition_time == T1


def test_other_conditions_and_order_are_kept() -> None:
    conditions: list[Condition] = []
    for type_ in ("Available", "Progressing", "Degraded"):
        conditions = set_condition(conditions, cond(type_, ConditionStatus.FALSE), T0)
    out = set_condition(conditions, cond("Progressing", ConditionStatus.TRUE), T1)
    assert [c.type for c in out] == ["Available", "Progressing", "Degraded"]
    assert [c.last_transition_time for c in out] == [T0, T1, T0]
    assert conditions[1].status == ConditionStatus.FALSE, "input list must not be mutated"


def test_utcnow_is_aware_and_whole_seconds() -> None:
    now = utcnow()
    assert now.tzinfo is not None and now.microsecond == 0


def test_status_rejects_duplicate_condition_types() -> None:
    with pytest.raises(ValidationError) as err:
        ModelDeploymentStatus(
            conditions=[
                cond("Available", ConditionStatus.TRUE),
                cond("Available", ConditionStatus.FALSE),
            ]
        )
    assert err.value.errors()[0]["loc"] == ("conditions",)
    assert "unique" in str(err.value)


def test_status_accepts_distinct_condition_types() -> None:
    status = ModelDeploymentStatus.model_validate(
        {
            "conditions": [
                {"type": "Available", "status": "True"},
                {"type": "Degraded", "status": "False"},
            ]
        }
    )
    assert [c.type for c in status.conditions] == ["Available", "Degraded"]


def test_condition_serializes_like_metav1() -> None:
    c = set_condition([], cond("Available", ConditionStatus.TRUE), T0)[0]
    c = c.model_copy(update={"observed_generation": 3})
    api = c.to_api()
    assert api["status"] == "True"
    assert api["observedGeneration"] == 3
    assert api["lastTransitionTime"] in ("2025-01-01T12:00:00Z", "2025-01-01T12:00:00+00:00")
    assert Condition.model_validate(api) == c


def full_plan_spec() -> sp.ScalePlanSpec:
    return sp.ScalePlanSpec(
        deployment="llama",
        model_digest="sha256:abc",
        blocks=[
            sp.Block(
                index=i, layer_start=2 * i, layer_end=2 * i + 2, bytes=1 << 20, checksum=f"c{i}"
            )
            for i in range(4)
        ],
        sources=[
            sp.Source(pod="llama-w-0", tier=sp.SourceTier.GPU),
            sp.Source(pod="llama-w-1", tier=sp.SourceTier.HOST),
        ],
        targets=["llama-w-2", "llama-w-3", "llama-w-4"],
        strategy=sp.PlanStrategy.BINOMIAL,
        chains=[sp.Chain(source="llama-w-0", hops=["llama-w-2", "llama-w-3"], blocks=[0, 1])],
        schedule=[
            sp.Step(transfers=[sp.Transfer(sender="llama-w-0", receiver="llama-w-2", block=0)]),
            sp.Step(transfers=[sp.Transfer(sender="llama-w-2", receiver="llama-w-3", block=0)]),
        ],
        block_orders=[sp.BlockOrder(source="llama-w-0", order=[0, 1, 2, 3])],
        execution_pipelines=[
            sp.ExecutionPipeline(
                stages=[
                    sp.Stage(pod="llama-w-2", layer_start=0, layer_end=4),
                    sp.Stage(pod="llama-w-3", layer_start=4, layer_end=8),
                ]
            )
        ],
        predicted_completion_seconds=1.25,
    )


def test_scale_plan_spec_round_trips() -> None:
    spec = full_plan_spec()
    api = spec.to_api()
    assert json.loads(json.dumps(api)) == api
    assert {
        "modelDigest",
        "blockOrders",
        "executionPipelines",
        "predictedCompletionSeconds",
    } <= set(api)
    assert api["blocks"][1] == {
        "index": 1,
        "layerStart": 2,
        "layerEnd": 4,
        "bytes": 1 << 20,
        "checksum": "c1",
    }
    assert api["sources"][1]["tier"] == "host"
    assert sp.ScalePlanSpec.model_validate(api) == spec


def test_scale_plan_status_round_trips() -> None:
    status = sp.ScalePlanStatus(
        phase=sp.PlanPhase.RUNNING,
        target_count=3,
        progress="1/3",
        targets=[
            sp.TargetProgress(
                pod="llama-w-2",
                blocks_received=4,
                bytes_received=4 << 20,
                complete=True,
                first_complete_time=T1,
            ),
            sp.TargetProgress(pod="llama-w-3", blocks_received=1, bytes_received=1 << 20),
        ],
        bytes_moved=5 << 20,
        start_time=T0,
        conditions=set_condition([], cond("Failed", ConditionStatus.FALSE), T0),
    )
    api = status.to_api()
    assert json.loads(json.dumps(api)) == api
    assert api["phase"] == "Running" and api["targetCount"] == 3
    assert "completionTime" not in api, "unset optionals are left out"
    assert sp.ScalePlanStatus.model_validate(api) == status


def test_scale_plan_rejects_bad_shapes() -> None:
    base = full_plan_spec().to_api()
    for field, bad in [("strategy", "star"), ("chains", [{"source": "a", "hops": []}])]:
        with pytest.raises(ValidationError) as err:
            sp.ScalePlanSpec.model_validate({**base, field: bad})
        assert err.value.errors()[0]["loc"][0] == field
