"""The shared protocol: wire names, tolerant status reading, plans as the API holds them."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from cascade_api.scaleplan import Block, Chain, PlanStrategy, ScalePlanSpec, Source, SourceTier
from cascade_protocol.control import DrainRequest, ManifestInfo, ServeRequest, TransferRequest
from cascade_protocol.service import QUIET_PATHS
from cascade_protocol.status import (
    EnginePhase,
    PipelineInfo,
    TransferReport,
    TransferRole,
    WorkerPhase,
    WorkerStatus,
)

BLOCKS = [Block(index=0, layer_start=0, layer_end=2, bytes=10, checksum="c0")]


def receiving() -> WorkerStatus:
    return WorkerStatus(
        pod="m-w-1",
        model_uri="file:///m",
        data_port=18515,
        phase=WorkerPhase.READY,
        model_digest="d1",
        blocks_loaded=4,
        blocks_total=4,
        bytes_received=400,
        last_transfer=TransferReport(
            role=TransferRole.TARGET, complete=True, bytes_received=400, complete_s=1.5
        ),
        engine=EnginePhase.SERVING,
        serving=True,
        layers=(0, 4),
        pipeline=PipelineInfo(stages=["10.0.0.2:18516"], local_layers=(0, 2)),
    )


def test_status_speaks_camel_case_like_the_control_bodies() -> None:
    doc = receiving().model_dump(mode="json", by_alias=True)
    assert {"modelUri", "dataPort", "modelDigest", "blocksLoaded", "blocksTotal"} <= set(doc)
    assert {"bytesReceived", "lastTransfer", "engineError", "maxBatch", "maxModelLen"} <= set(doc)
    assert doc["lastTransfer"]["completeS"] == 1.5 and doc["lastTransfer"]["role"] == "target"
    assert doc["pipeline"] == {
        "stages": ["10.0.0.2:18516"],
        "localLayers": [0, 2],
        "coveredAt": None,
        "servingAt": None,
    }
    assert doc["phase"] == "ready" and doc["engine"] == "serving" and doc["layers"] == [0, 4]
    assert WorkerStatus.model_validate_json(json.dumps(doc)) == receiving()


def test_status_reader_ignores_what_a_newer_worker_adds() -> None:
    doc = receiving().model_dump(mode="json", by_alias=True) | {"somethingNew": 1}
    assert WorkerStatus.model_validate(doc) == receiving()


def test_status_reader_refuses_an_unknown_phase() -> None:
    with pytest.raises(ValidationError):
        WorkerStatus.model_validate({"pod": "p", "phase": "sleeping"})


def test_facts_about_a_status() -> None:
    assert receiving().holds_model
    assert not WorkerStatus(pod="p", blocks_loaded=0, blocks_total=0).holds_model
    assert not WorkerStatus(pod="p", blocks_loaded=3, blocks_total=4).holds_model
    assert [p for p in WorkerPhase if p.busy] == [WorkerPhase.LOADING, WorkerPhase.TRANSFERRING]
    assert [p for p in EnginePhase if p.on] == [EnginePhase.STARTING, EnginePhase.SERVING]


def test_only_a_complete_target_has_a_measured_time() -> None:
    done = TransferReport(role=TransferRole.TARGET, complete=True, complete_s=2.0)
    assert done.target_seconds == 2.0
    assert done.model_copy(update={"complete": False}).target_seconds is None
    assert done.model_copy(update={"role": TransferRole.SOURCE}).target_seconds is None


def test_transfer_order_carries_the_plan_as_the_api_holds_it() -> None:
    spec = ScalePlanSpec(
        deployment="m",
        model_digest="d1",
        blocks=BLOCKS,
        sources=[Source(pod="m-w-0", tier=SourceTier.HOST)],
        targets=["m-w-1"],
        strategy=PlanStrategy.CHAIN,
        chains=[Chain(source="m-w-0", hops=["m-w-1"])],
    )
    req = TransferRequest(plan=spec, peers={"m-w-0": "10.0.0.1:18515"})
    doc = req.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert doc == {
        "plan": spec.to_api(),
        "peers": {"m-w-0": "10.0.0.1:18515"},
        "live": False,
        "cooperative": False,
    }
    assert "reason" not in doc["plan"]  # an empty string the 1.20 API server would refuse
    assert TransferRequest.model_validate(doc) == req


def test_control_bodies_are_camel_case_and_strict() -> None:
    body = ServeRequest(max_batch=4, max_model_len=256)
    assert body.model_dump(mode="json", by_alias=True, exclude_defaults=True) == {
        "maxBatch": 4,
        "maxModelLen": 256,
    }
    assert DrainRequest.model_validate({"timeoutS": 1.5}).timeout_s == 1.5
    with pytest.raises(ValidationError):
        DrainRequest.model_validate({"timeout": 1.5})  # a typo is no default
    info = ManifestInfo(pod="p", data_port=1, model_digest="d", blocks=BLOCKS)
    assert ManifestInfo.model_validate(info.model_dump(mode="json", by_alias=True)) == info


def test_polled_paths_are_kept_out_of_the_access_log() -> None:
    assert {"/healthz", "/readyz", "/metrics", "/v1/load", "/v1/status"} <= QUIET_PATHS
