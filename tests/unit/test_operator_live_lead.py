"""The operator plans with its deployment's liveScaling.minLeadSeconds: a pipeline forms
only where it would serve that long before one of its members could serve alone."""

from __future__ import annotations

from typing import Any

from operator_fixtures import holder, md
from operator_fixtures import worker as idle
from test_operator_calibration import BLOCKS, topo

from cascade_api.scaleplan import ScalePlanSpec
from cascade_operator.weights.pool import PoolInput, decide_pool
from cascade_operator.weights.targets import Targets, make_plan


def live_plan(**live: Any) -> ScalePlanSpec:
    workers = [holder("llama-0"), idle("llama-1"), idle("llama-2")]
    pool = decide_pool(PoolInput(workers, md().host_copies))
    spec = md(multicast={"strategy": "chain"}, liveScaling=live)
    made = make_plan(
        "llama", spec, pool, BLOCKS, Targets(pods=["llama-1", "llama-2"]), workers, topo()
    )
    assert isinstance(made, ScalePlanSpec)
    return made


def test_the_deployments_minimum_lead_decides_whether_a_pipeline_forms() -> None:
    default = live_plan()  # 1 GiB at 1000 Mbit/s: a pipeline leads by seconds
    (pipeline,) = default.execution_pipelines
    assert pipeline.ready_seconds is not None and default.predicted_completion_seconds
    lead = default.predicted_completion_seconds - pipeline.ready_seconds
    assert lead > md().live_scaling.min_lead_seconds == 1.0
    assert live_plan(minLeadSeconds=0).execution_pipelines == default.execution_pipelines
    assert live_plan(minLeadSeconds=round(lead) + 5).execution_pipelines == []
    assert live_plan(enabled=False).execution_pipelines == []
