"""The InferencePool of one ModelDeployment (Gateway API Inference Extension), pure.

Where the `inferencepools.inference.networking.k8s.io` CRD (v1) is served, the operator
keeps one pool per deployment, named like it and owned by it, so an inference gateway's
endpoint picker (EPP) sees the deployment's instances as they come and go. The EPP picks
one model-server pod per request (`podIP:targetPort`) and scrapes that port's
`/metrics`, so the pool's members are the worker pods (the model servers), on the
worker's port; the gateway pods are a router of their own.

A pool's selector is a plain `matchLabels`, which cannot say "Ready", so the operator
keeps a label on the worker pods that serve now (`LABEL_SERVING`: Ready, not on the way
out, and not a pipeline stage, idle or loading by its status) and takes it off the
others; the pool selects on it. The endpoint picker's Service is the deployment's
annotation `EPP_ANNOTATION` (`name[:port]`), else `<md>-epp` on the EPP's usual gRPC
port: the reference is required by the v1 CRDs of releases before v1.6. What the EPP
expects that the worker does not provide (the OpenAI API on that port, vLLM metric
names) is in docs/ecosystem.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cascade_api import constants as c
from cascade_operator.builders import labels, owner_reference, selector_labels
from cascade_operator.observed import MdRef, PodView
from cascade_protocol.status import ServingMode

Manifest = dict[str, Any]

GROUP = "inference.networking.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "InferencePool"
PLURAL = "inferencepools"
COMPONENT = "inference-pool"  # the pool's own component label (it is no pod)

LABEL_SERVING = f"{c.GROUP}/serving"
SERVING = "true"
EPP_ANNOTATION = f"{c.GROUP}/endpoint-picker"
EPP_PORT = 9002  # the reference EPP's ext-proc (gRPC) port
# Modes in which a Ready worker takes no requests (a stage serves another's pipeline).
NOT_SERVING = frozenset({ServingMode.IDLE, ServingMode.LOADING, ServingMode.STAGE})


@dataclass(frozen=True)
class PoolSeen:
    """What the API holds now: the pods carrying the serving label, and the pool."""

    labelled: frozenset[str] = frozenset()
    pool: Manifest | None = None


@dataclass(frozen=True)
class PoolPlan:
    """The writes that bring the API to the built state: pod -> serving label value
    (None: remove it), and the pool to create or put back (None: it is as built)."""

    namespace: str
    labels: dict[str, str | None] = field(default_factory=dict)
    pool: Manifest | None = None


def serving_selector(md: str) -> str:
    """The label selector of the deployment's pods that carry the serving label."""
    return ",".join(f"{k}={v}" for k, v in pool_labels(md).items())


def pool_labels(md: str) -> dict[str, str]:
    """What the pool selects: this deployment's worker pods that serve now."""
    return {**selector_labels(md, c.COMPONENT_WORKER), LABEL_SERVING: SERVING}


def serving(pod: PodView, mode: ServingMode | None) -> bool:
    """The pod takes requests now: Ready, not leaving, and not known to serve nothing
    (mode None: its status was not read; readiness decides)."""
    usable = pod.ready and not pod.terminating and not pod.failed and not pod.host_copy
    return usable and mode not in NOT_SERVING


def endpoint_picker(md: str, annotations: Mapping[str, str]) -> Manifest:
    """The EPP Service reference: the annotation's `name[:port]`, else `<md>-epp`."""
    raw = str(annotations.get(EPP_ANNOTATION) or "").strip()
    name, _, port = raw.partition(":")
    number = int(port) if port.strip().isdigit() else EPP_PORT
    return {"name": name.strip() or f"{md}-epp", "port": {"number": number}}


def inference_pool(ref: MdRef, annotations: Mapping[str, str]) -> Manifest:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": ref.name,
            "namespace": ref.namespace,
            "labels": labels(ref.name, COMPONENT),
            "ownerReferences": [owner_reference(ref)],
        },
        "spec": {
            "selector": {"matchLabels": pool_labels(ref.name)},
            "targetPorts": [{"number": c.WORKER_PORT}],
            "endpointPickerRef": endpoint_picker(ref.name, annotations),
        },
    }


def _ours(spec: Manifest) -> tuple[Any, ...]:
    """The fields the operator sets, with the API server's defaults filled in, so a
    stored pool compares equal to the built one (a v1.4+ CRD adds appProtocol, and the
    reference's group, kind and failureMode)."""
    ref = spec.get("endpointPickerRef") or {}
    return (
        (spec.get("selector") or {}).get("matchLabels"),
        spec.get("targetPorts"),
        (ref.get("group") or "", ref.get("kind") or "Service", ref.get("name"), ref.get("port")),
        ref.get("failureMode") or "FailClose",
    )


def stale(desired: Manifest, found: Manifest | None) -> bool:
    """The pool is missing or someone changed what the operator sets."""
    return found is None or _ours(found.get("spec") or {}) != _ours(desired["spec"])


def keep_pool(
    body: Manifest,
    pods: list[PodView],
    modes: Mapping[str, ServingMode | None],
    seen: PoolSeen,
) -> PoolPlan:
    """Label the serving pods, unlabel the rest, and the pool when it is not as built."""
    ref = MdRef.of(body)
    want = {p.name for p in pods if serving(p, modes.get(p.name))}
    moves: dict[str, str | None] = {name: SERVING for name in sorted(want - seen.labelled)}
    moves |= {name: None for name in sorted(seen.labelled - want)}
    desired = inference_pool(ref, body["metadata"].get("annotations") or {})
    return PoolPlan(ref.namespace, moves, desired if stale(desired, seen.pool) else None)
