"""What each cold-start mode deploys (pure).

The modes differ in where a new instance's weights come from and whether its start-up
state is materialized:

| mode | start | weights from |
|---|---|---|
| storage | 0 replicas, no host copy | the model's storage (rate-limited on the dev cluster) |
| storage_materialized | same, materialization on | storage |
| pool | 0 replicas, one host copy that holds the model | the host copy, over the network |
| peer | 1 serving replica, no host copy | the serving instance (a ScalePlan) |

`zero_to_one` scales 0 -> 1 (peer: 1 -> 2, the only way it has a source); `one_to_two`
scales 1 -> 2 with the same weight sources (storage: multicast.fromPeers false).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from cascade_api.modeldeployment import ModelDeploymentSpec

MODES = ("storage", "storage_materialized", "pool", "peer")
CASES = ("zero_to_one", "one_to_two")

BASE_SPEC: dict[str, Any] = {
    "model": {"uri": "", "servedName": "cold"},
    "instance": {"gpus": 1},
    "engine": {"maxBatchSize": 8},
    "scaling": {"autoscaler": "External", "minReplicas": 0, "maxReplicas": 8},
    "multicast": {"strategy": "chain", "blocks": 8},
}


def start_replicas(mode: str, case: str) -> int:
    """Replicas before the decision."""
    return 1 if mode == "peer" or case == "one_to_two" else 0


def mode_spec(base: Mapping[str, Any], mode: str, case: str) -> dict[str, Any]:
    if mode not in MODES or case not in CASES:
        raise ValueError(f"unknown mode/case {mode!r}/{case!r}")
    spec = copy.deepcopy(dict(base))
    spec["replicas"] = start_replicas(mode, case)
    spec["hostCopies"] = 1 if mode == "pool" else 0
    spec["materialization"] = {"enabled": mode != "storage"}
    if mode.startswith("storage") and case == "one_to_two":
        spec.setdefault("multicast", {})["fromPeers"] = False
    ModelDeploymentSpec.model_validate(spec)
    return spec
