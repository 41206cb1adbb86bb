"""The profile Job of spec.materialization (Medusa): built, observed and decided here.

Start-up state (the engine's KV-cache sizing; compile caches when compile is on) is true
only for the start that measured it, so a worker keys it by model digest, accelerator,
dtype and engine limits (cascade_protocol.materialize). The operator cannot compute that
key (the digest and the accelerator are found by the worker), but it knows every input
it sets: the model URI, the engine limits, the block count, the instance's resources
and placement, the worker image. `profile_hash` hashes those; while materialization is
on, one batch/v1 Job per deployment runs for the current hash (`<md>-materialize-<h>`):
the worker process in its materialize role, shaped like an instance (same env, same
resources, same placement) so it profiles on the accelerator the instances get, and
writes `<model dir>/.materialized/<key id>.json` beside the weights. A spec change makes
a new hash: the new Job is created and the stale one deleted. A failed Job stays (its
Event says so; deleting it retries). Workers profile at start until an artifact exists.

Pure: manifests and observations are plain dicts in and out; the controller acts.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from cascade_api import constants as c
from cascade_api.materialization import MaterializationPhase
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator.builders import (
    component_selector,
    owner_reference,
    process_pod,
)
from cascade_operator.config import OperatorConfig
from cascade_operator.events import EventNote
from cascade_operator.observed import MdRef
from cascade_operator.pod_options import give_accelerators, worker_resources
from cascade_protocol.status import WorkerRole

Manifest = dict[str, Any]
HASH_HEX = 10
JOB_INFIX = "-materialize-"
# A Job's name becomes a label value (job-name) on its pods: at most 63 characters.
MAX_JOB_NAME = 63
# Retries of a failed profile run before the Job is Failed (then workers keep profiling).
BACKOFF_LIMIT = 2


def profile_inputs(ref: MdRef, spec: ModelDeploymentSpec, cfg: OperatorConfig) -> Manifest:
    """What the recorded state depends on that the operator sets. The deployment's name
    is in too, so a name cut to fit 63 characters cannot collide with another's."""
    return {
        "deployment": ref.name,
        "model": spec.model.uri,
        "image": cfg.worker_image,  # the torch build and the engine's artifact format
        "dtype": str(spec.engine.dtype),
        "maxModelLen": spec.engine.max_model_len,
        "maxBatchSize": spec.engine.max_batch_size,
        "maxPrefillTokensPerStep": spec.engine.max_prefill_tokens_per_step,
        "blocks": spec.multicast.blocks,  # the packed layout is part of the model digest
        "resources": worker_resources(spec, cfg),  # GPUs and memory: the accelerator's budget
        "nodeSelector": dict(sorted(spec.instance.node_selector.items())),
        "tolerations": [t.to_api() for t in spec.instance.tolerations],
    }


def profile_hash(ref: MdRef, spec: ModelDeploymentSpec, cfg: OperatorConfig) -> str:
    doc = json.dumps(profile_inputs(ref, spec, cfg), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()[:HASH_HEX]


def job_name(md: str, digest: str) -> str:
    return f"{md[: MAX_JOB_NAME - len(JOB_INFIX) - HASH_HEX]}{JOB_INFIX}{digest}"


def job_selector(md: str) -> str:
    return component_selector(md, c.COMPONENT_MATERIALIZE)


def profile_job(ref: MdRef, spec: ModelDeploymentSpec, cfg: OperatorConfig) -> Manifest:
    """The Job that profiles this spec once: a worker pod in the materialize role that
    exits when the artifact is written (restartPolicy Never, no probes)."""
    digest = profile_hash(ref, spec, cfg)
    name = job_name(ref.name, digest)
    role = {"name": "CASCADE_ROLE", "value": str(WorkerRole.MATERIALIZE)}
    pod = process_pod(ref, spec, cfg, name, c.COMPONENT_MATERIALIZE, [role])
    pod_spec = pod["spec"]
    container = pod_spec["containers"][0]
    for probe in ("readinessProbe", "livenessProbe"):  # a one-shot run serves nothing
        container.pop(probe, None)
    give_accelerators(container, spec, cfg)
    container["env"] = [
        {"name": e["name"], "value": "on"} if e["name"] == "CASCADE_MATERIALIZATION" else e
        for e in container["env"]
    ]
    pod_spec["restartPolicy"] = "Never"
    _writable_model(pod_spec)
    job_labels = {**pod["metadata"]["labels"], c.LABEL_PROFILE: digest}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": job_labels,
            "ownerReferences": [owner_reference(ref)],
        },
        # No ttlSecondsAfterFinished: the operator reads a finished Job's outcome, and a
        # Job that is gone would be created again.
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "template": {
                "metadata": {"labels": job_labels, **_annotations(pod)},
                "spec": pod_spec,
            },
        },
    }


def _annotations(pod: Manifest) -> Manifest:
    """The worker pod's annotations (a Multus network...) for the Job's pods."""
    annotations = pod["metadata"].get("annotations")
    return {"annotations": annotations} if annotations else {}


def _writable_model(pod_spec: Manifest) -> None:
    """The Job writes the artifact beside the weights: a pvc:// claim is mounted
    read-write here only (instances and host copies keep it read-only)."""
    for volume in pod_spec.get("volumes") or []:
        if "persistentVolumeClaim" in volume:
            volume["persistentVolumeClaim"]["readOnly"] = False
    for container in pod_spec["containers"]:
        for mount in container.get("volumeMounts") or []:
            mount["readOnly"] = False


@dataclass(frozen=True)
class JobView:
    """A profile Job as observed: which inputs it profiles and how it ended."""

    name: str
    profile: str  # label LABEL_PROFILE: the hash it was created for
    phase: MaterializationPhase
    message: str = ""  # why it failed (the Failed condition's reason and message)
    terminating: bool = False

    @classmethod
    def of(cls, body: Manifest) -> JobView:
        meta, status = body["metadata"], body.get("status") or {}
        true = {
            cond.get("type"): cond
            for cond in status.get("conditions") or []
            if cond.get("status") == "True"
        }
        failed = true.get("Failed") or {}
        return cls(
            name=meta["name"],
            profile=str((meta.get("labels") or {}).get(c.LABEL_PROFILE) or ""),
            phase=job_phase(status, true),
            message=": ".join(str(failed[k]) for k in ("reason", "message") if failed.get(k)),
            terminating=meta.get("deletionTimestamp") is not None,
        )


def job_phase(status: Manifest, true: dict[Any, Manifest]) -> MaterializationPhase:
    if "Complete" in true or int(status.get("succeeded") or 0) > 0:
        return MaterializationPhase.SUCCEEDED
    if "Failed" in true:
        return MaterializationPhase.FAILED
    if int(status.get("active") or 0) > 0:
        return MaterializationPhase.RUNNING
    return MaterializationPhase.PENDING


@dataclass(frozen=True)
class JobShown:
    """What status.materialization says of the Job (the instances' side is added there)."""

    enabled: bool
    job: str | None = None
    phase: MaterializationPhase | None = None
    message: str = ""


@dataclass(frozen=True)
class MaterializationDecision:
    create: list[Manifest] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)  # Job names
    events: list[EventNote] = field(default_factory=list)
    shown: JobShown = field(default_factory=lambda: JobShown(enabled=False))


def decide_materialization(
    ref: MdRef, spec: ModelDeploymentSpec, jobs: list[JobView], cfg: OperatorConfig
) -> MaterializationDecision:
    """Keep exactly the Job of the current profile inputs while enabled, none otherwise.
    A Job being deleted (a user retrying a failed one) is waited for, not re-created."""
    alive = [j for j in jobs if not j.terminating]
    if not spec.materialization.enabled:
        return MaterializationDecision(delete=[j.name for j in alive])
    manifest = profile_job(ref, spec, cfg)
    name = manifest["metadata"]["name"]
    current = next((j for j in jobs if j.name == name), None)
    stale = [j.name for j in alive if j.name != name]
    if current is not None:
        shown = JobShown(True, name, current.phase, current.message)
        return MaterializationDecision(delete=stale, shown=shown)
    replaces = f" (replacing {', '.join(stale)})" if stale else ""
    note = EventNote("Normal", "MaterializationStarted", f"creating profile Job {name}{replaces}")
    shown = JobShown(True, name, MaterializationPhase.PENDING)
    return MaterializationDecision([manifest], stale, [note], shown)
