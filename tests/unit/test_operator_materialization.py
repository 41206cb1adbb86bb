"""The profile Job of spec.materialization: its name and hash, its manifest, how a Job's
status reads, and the decision tick by tick (create, keep, replace a stale one, delete
when disabled), all without a cluster."""

from __future__ import annotations

from typing import Any

import pytest
from operator_fixtures import REF
from operator_fixtures import md as base_md

from cascade_api import constants as c
from cascade_api.materialization import MaterializationPhase
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import builders, pod_options
from cascade_operator.config import OperatorConfig
from cascade_operator.host_copies import host_copy_pod
from cascade_operator.materialization import (
    JobView,
    decide_materialization,
    job_name,
    profile_hash,
    profile_job,
)
from cascade_operator.observed import MdRef


def md(**spec: Any) -> ModelDeploymentSpec:
    """A deployment with materialization on (it is opt in) unless `spec` says."""
    return base_md(**({"materialization": {"enabled": True}} | spec))


CFG = OperatorConfig(worker_image="reg/cascade-worker:9")
PVC = "pvc://models/llama/7b"
Body = dict[str, Any]


def env(container: Body) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def job_body(manifest: Body, status: Body | None = None, deleting: bool = False) -> Body:
    """A Job as the API server returns it after `manifest` was created."""
    meta = dict(manifest["metadata"])
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T12:00:00Z"
    return {**manifest, "metadata": meta, "status": status or {}}


def view(manifest: Body, status: Body | None = None, deleting: bool = False) -> JobView:
    return JobView.of(job_body(manifest, status, deleting))


# --- name and hash -------------------------------------------------------------------


def test_the_hash_is_stable_and_moves_with_every_profile_input() -> None:
    base = md()
    h = profile_hash(REF, base, CFG)
    assert len(h) == 10 and h == profile_hash(REF, md(), CFG)
    # What a run does not depend on leaves the hash alone.
    for same in (md(replicas=7), md(hostCopies=3), md(slo={"batch": {"itlMs": 5}})):
        assert profile_hash(REF, same, CFG) == h
    changed = [
        md(model={"uri": "file:///models/other"}),
        md(engine={"dtype": "bfloat16"}),
        md(engine={"maxModelLen": 2048}),
        md(engine={"maxBatchSize": 8}),
        md(engine={"maxPrefillTokensPerStep": 64}),
        md(multicast={"blocks": 4}),
        md(instance={"gpus": 2}),
        md(instance={"resources": {"limits": {"memory": "8Gi"}}}),
        md(instance={"nodeSelector": {c.LABEL_GPU_PRODUCT: "H100"}}),
        md(instance={"tolerations": [{"key": "gpu", "operator": "Exists"}]}),
    ]
    hashes = {profile_hash(REF, s, CFG) for s in changed}
    assert h not in hashes and len(hashes) == len(changed)
    assert profile_hash(REF, base, OperatorConfig(worker_image="reg/w:10")) != h


def test_job_names_fit_a_label_value_and_stay_apart_across_deployments() -> None:
    assert job_name("llama", "0123456789") == "llama-materialize-0123456789"
    long_a, long_b = MdRef("a" * 60 + "x", "models", "u1"), MdRef("a" * 60 + "y", "models", "u2")
    name_a = profile_job(long_a, md(), CFG)["metadata"]["name"]
    name_b = profile_job(long_b, md(), CFG)["metadata"]["name"]
    assert len(name_a) == len(name_b) == 63 and name_a != name_b


# --- the manifest --------------------------------------------------------------------


def test_the_job_runs_the_worker_once_in_the_materialize_role_shaped_like_an_instance() -> None:
    spec = md(
        instance={
            "gpus": 1,
            "nodeSelector": {c.LABEL_GPU_PRODUCT: "H100"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "resources": {"requests": {"cpu": 4}},
        },
        engine={"maxBatchSize": 16},
    )
    job = profile_job(REF, spec, CFG)
    meta, jspec = job["metadata"], job["spec"]
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert meta["name"] == f"llama-materialize-{profile_hash(REF, spec, CFG)}"
    assert meta["ownerReferences"][0]["uid"] == REF.uid
    assert meta["labels"][c.LABEL_COMPONENT] == c.COMPONENT_MATERIALIZE
    assert meta["labels"][c.LABEL_PROFILE] == profile_hash(REF, spec, CFG)
    assert jspec["backoffLimit"] == 2 and "ttlSecondsAfterFinished" not in jspec
    template = jspec["template"]
    assert template["metadata"]["labels"] == meta["labels"]
    pod = template["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["nodeSelector"] == {c.LABEL_GPU_PRODUCT: "H100"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    (container,) = pod["containers"]
    assert "readinessProbe" not in container and "livenessProbe" not in container
    assert container["image"] == "reg/cascade-worker:9"
    assert container["resources"] == pod_options.worker_resources(spec, CFG)
    assert container["resources"]["limits"][c.GPU_RESOURCE] == "1"
    got = env(container)
    assert got["CASCADE_ROLE"] == "materialize"
    assert got["CASCADE_MATERIALIZATION"] == "on"
    assert got["CASCADE_MAX_BATCH_SIZE"] == "16"
    assert got["CASCADE_MODEL_PATH"] == "/models/tiny"
    # The serving engine's env is the Job's: the key a profile computes is the instances'.
    serving = env(builders.worker_pod(REF, spec, 0, CFG)["spec"]["containers"][0])
    shared = {k for k in serving if k not in ("CASCADE_SERVE",)}
    assert {k: got[k] for k in shared} == {k: serving[k] for k in shared}


def test_a_pvc_model_is_writable_in_the_job_only() -> None:
    spec = md(model={"uri": PVC})
    pod = profile_job(REF, spec, CFG)["spec"]["template"]["spec"]
    assert pod["volumes"][0] == {
        "name": "model",
        "persistentVolumeClaim": {"claimName": "models", "readOnly": False},
    }
    assert pod["containers"][0]["volumeMounts"][0]["readOnly"] is False
    # Instances and host copies keep the claim read-only (a fresh build each time).
    for other in (builders.worker_pod(REF, spec, 0, CFG), host_copy_pod(REF, spec, 0, CFG)):
        assert other["spec"]["volumes"][0]["persistentVolumeClaim"]["readOnly"] is True
        assert other["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] is True


@pytest.mark.parametrize("enabled", [True, False])
def test_instances_and_host_copies_are_told_whether_to_restore(enabled: bool) -> None:
    spec = md(materialization={"enabled": enabled})
    want = "on" if enabled else "off"
    for pod in (builders.worker_pod(REF, spec, 0, CFG), host_copy_pod(REF, spec, 0, CFG)):
        assert env(pod["spec"]["containers"][0])["CASCADE_MATERIALIZATION"] == want


# --- a Job's status ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        ({}, MaterializationPhase.PENDING),
        ({"active": 1}, MaterializationPhase.RUNNING),
        ({"active": 1, "failed": 1}, MaterializationPhase.RUNNING),  # retrying
        (
            {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]},
            MaterializationPhase.SUCCEEDED,
        ),
        (
            {"failed": 3, "conditions": [{"type": "Failed", "status": "True"}]},
            MaterializationPhase.FAILED,
        ),
        ({"conditions": [{"type": "Failed", "status": "False"}]}, MaterializationPhase.PENDING),
    ],
)
def test_a_jobs_phase_comes_from_its_status(status: Body, phase: MaterializationPhase) -> None:
    assert view(profile_job(REF, md(), CFG), status).phase == phase


def test_a_failed_job_says_why() -> None:
    failed = {
        "type": "Failed",
        "status": "True",
        "reason": "BackoffLimitExceeded",
        "message": "Job has reached the specified backoff limit",
    }
    got = view(profile_job(REF, md(), CFG), {"conditions": [failed]})
    assert got.message == "BackoffLimitExceeded: Job has reached the specified backoff limit"
    assert got.profile == profile_hash(REF, md(), CFG)


# --- the decision, tick by tick ------------------------------------------------------


def test_decision_tick_by_tick_create_keep_replace_and_delete() -> None:
    spec = md()
    # Tick 1: no Job yet: create the current one; status shows it Pending.
    first = decide_materialization(REF, spec, [], CFG)
    (manifest,) = first.create
    assert first.delete == [] and [e.reason for e in first.events] == ["MaterializationStarted"]
    assert (first.shown.job, first.shown.phase) == (
        manifest["metadata"]["name"],
        MaterializationPhase.PENDING,
    )
    # Tick 2: it exists and runs: nothing to do, nothing to tell.
    running = view(manifest, {"active": 1})
    second = decide_materialization(REF, spec, [running], CFG)
    assert (second.create, second.delete, second.events) == ([], [], [])
    assert second.shown.phase == MaterializationPhase.RUNNING
    # Tick 3: the engine limits change: a new Job for the new hash, the old one deleted.
    changed = md(engine={"maxModelLen": 1024})
    third = decide_materialization(REF, changed, [running], CFG)
    (new,) = third.create
    assert new["metadata"]["name"] != manifest["metadata"]["name"]
    assert third.delete == [manifest["metadata"]["name"]]
    assert manifest["metadata"]["name"] in third.events[0].message
    # Tick 4: the old one is on its way out, the new one succeeded: nothing more.
    done = view(new, {"succeeded": 1})
    fourth = decide_materialization(REF, changed, [view(manifest, deleting=True), done], CFG)
    assert (fourth.create, fourth.delete) == ([], [])
    assert fourth.shown.phase == MaterializationPhase.SUCCEEDED
    # Tick 5: disabled: every Job of the deployment goes; status says disabled.
    off = md(engine={"maxModelLen": 1024}, materialization={"enabled": False})
    fifth = decide_materialization(REF, off, [done], CFG)
    assert (fifth.create, fifth.delete) == ([], [new["metadata"]["name"]])
    assert not fifth.shown.enabled and fifth.shown.job is None


def test_a_failed_job_is_kept_and_a_deleted_one_is_waited_for() -> None:
    spec = md()
    manifest = profile_job(REF, spec, CFG)
    failed = view(manifest, {"conditions": [{"type": "Failed", "status": "True"}]})
    kept = decide_materialization(REF, spec, [failed], CFG)
    assert (kept.create, kept.delete) == ([], [])  # no retry loop: the Event tells
    assert kept.shown.phase == MaterializationPhase.FAILED
    # A user deletes it to retry: while it terminates, nothing; once gone, a new one.
    waiting = decide_materialization(REF, spec, [view(manifest, deleting=True)], CFG)
    assert (waiting.create, waiting.delete) == ([], [])
    assert len(decide_materialization(REF, spec, [], CFG).create) == 1
