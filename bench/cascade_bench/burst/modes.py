"""The five ways a deployment meets the burst: one base spec, a patch per mode.

| mode           | spec patch                                 | replicas | new instances serve |
|----------------|--------------------------------------------|----------|---------------------|
| stop_the_world | liveScaling.enabled false                  | 1 -> N   | once complete       |
| pipelines      | liveScaling {enabled, cooperative false}   | 1 -> N   | in pipelines (1)    |
| cooperative    | liveScaling {enabled, cooperative true}    | 1 -> N   | (1) + (2)           |
| all_cached     | multicast.fromPeers false, liveScaling off | 1 -> N   | once loaded (3)     |
| prescaled      | replicas N, liveScaling off                | N        | - (the floor)       |

(1) execution pipelines as their blocks cover the model, a source as the last stage;
(2) the source's queue moves to its paired target from the target's first block
(BlitzScale's cooperative execution, zigzag); (3) from their node's disk, no network.

Every mode scales to N (`/scale`, as `kubectl scale md`) at the burst's start except
`prescaled`, which has them already. The base (`BASE_SPEC`, bench/README.md says why)
is the autoscale bench's engine and SLOs with `scaling.autoscaler: External` (nobody
but the bench writes spec.replicas) and a chain multicast paced to `rateMbit`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from cascade_bench.autoscale.manifest import validate

MODES = ("stop_the_world", "pipelines", "cooperative", "all_cached", "prescaled")
SCALED = ("stop_the_world", "pipelines", "cooperative", "all_cached")  # 1 -> N at the burst

# tiny-llama (4 layers x 256 hidden, fp16, 6.8 MB of weights) in 4 blocks (one per
# layer), each sender paced to 6 Mbit/s: a chain to 3 targets takes about 10 s. Max
# batch 16 and 128-token prefill chunks as the autoscale bench (its profile's knee);
# the local batch controller off, so every mode runs the engine the profile measured.
# SLOs: interactive TTFT 5 s (the autoscale bench's: what the 0.2-core instance meets
# below its capacity), ITL 250 ms.
BASE_SPEC: dict[str, Any] = {
    "model": {"uri": "file:///var/lib/cascade/models/tiny-llama", "servedName": "chat"},
    "replicas": 1,
    "instance": {"gpus": 8},
    "engine": {"maxBatchSize": 16, "maxPrefillTokensPerStep": 128, "adaptiveBatch": False},
    "scaling": {"autoscaler": "External", "minReplicas": 1, "maxReplicas": 4},
    "slo": {
        "interactive": {"ttftMs": 5000, "itlMs": 250},
        "batch": {"ttftMs": 60000, "itlMs": 1000},
    },
    "multicast": {"strategy": "chain", "blocks": 4, "rateMbit": 6},
    # One host copy (the API's default, said here): a second source beside the serving
    # instance in every mode, so live plans' receivers can cover the model together.
    "hostCopies": 1,
}


def mode_spec(
    base: Mapping[str, Any], mode: str, scale_to: int, gpus: int | None = None
) -> dict[str, Any]:
    """The spec one mode creates (a deep copy of `base`, patched as the table says)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (one of {', '.join(MODES)})")
    if scale_to < 2:
        raise ValueError("the burst scales 1 -> N: N must be >= 2")
    spec = copy.deepcopy(dict(base))
    if gpus is not None:
        spec.setdefault("instance", {})["gpus"] = gpus
    scaling = spec.setdefault("scaling", {})
    scaling.update(autoscaler="External", minReplicas=1)
    scaling["maxReplicas"] = max(int(scaling.get("maxReplicas", 1)), scale_to)
    live = spec.setdefault("liveScaling", {})
    multicast = spec.setdefault("multicast", {})
    spec["replicas"] = scale_to if mode == "prescaled" else 1
    if mode == "pipelines":
        live.update(enabled=True, cooperative=False)
    elif mode == "cooperative":
        live.update(enabled=True, cooperative=True)
    else:
        live.update(enabled=False)
    if mode == "all_cached":
        multicast["fromPeers"] = False
    validate(spec)
    return spec


def ttft_slo_s(spec: Mapping[str, Any]) -> float:
    """The interactive TTFT SLO the burst is judged by (spec.slo.interactive.ttftMs)."""
    return validate(spec).slo.interactive.ttft_ms / 1000.0


def itl_slo_s(spec: Mapping[str, Any]) -> float:
    return validate(spec).slo.interactive.itl_ms / 1000.0


def transfer_bound_s(spec: Mapping[str, Any], model_bytes: int) -> float | None:
    """M / rateMbit: one sender's paced time for the whole model (None: unpaced)."""
    rate = (spec.get("multicast") or {}).get("rateMbit")
    return None if not rate else model_bytes * 8 / (float(rate) * 1e6)
