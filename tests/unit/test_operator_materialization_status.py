"""status.materialization and status.instances[].materialization: the profile Job's
phase, what each worker's start did, the counts and the mean seconds saved; and the
Events told once (Materialized, MaterializationFailed per Job; MaterializationRefused per
pod and artifact), from transitions of the stored status, so a repeat tells nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from operator_fixtures import GW_UP, NOW, pod

from cascade_api.materialization import MaterializationPhase
from cascade_api.modeldeployment import ModelDeploymentStatus
from cascade_operator.events import EventNote
from cascade_operator.materialization import JobShown
from cascade_operator.observed import PodView
from cascade_operator.spec import parse_spec
from cascade_operator.status import StatusInput, StatusUpdate, assemble
from cascade_protocol.materialize import MaterializationInfo, MaterializationState

JOB = "llama-materialize-0123456789"
RUNNING = JobShown(True, JOB, MaterializationPhase.RUNNING)


def info(state: str, **kw: Any) -> MaterializationInfo:
    return MaterializationInfo(key=kw.pop("key", "k1"), state=MaterializationState(state), **kw)


def assembled(
    pods: Sequence[PodView],
    reports: Mapping[str, MaterializationInfo] | None = None,
    shown: JobShown | None = RUNNING,
    previous: ModelDeploymentStatus | None = None,
) -> StatusUpdate:
    inp = StatusInput(
        previous=previous or ModelDeploymentStatus(),
        generation=2,
        parsed=parse_spec({"model": {"uri": "file:///m"}, "replicas": len(pods)}),
        pods=pods,
        gateway=GW_UP,
        selector="sel",
        endpoint="http://llama-gateway.models:8000",
        materializations=reports or {},
        materialization=shown,
    )
    return assemble(inp, NOW)


def mat_events(update: StatusUpdate) -> list[EventNote]:
    return [e for e in update.events if "Materializ" in e.reason]


def test_counts_mean_saved_and_per_instance_reports() -> None:
    pods = [pod(0), pod(1), pod(2), pod(3)]
    reports = {
        "llama-0": info("restored", artifact="k1", saved_s=2.004),
        "llama-1": info("restored", artifact="k1", saved_s=1.0),
        "llama-2": info("refused", artifact="old", reason="dtype: 'float16' != 'float32'"),
        "llama-3": info("profiled"),
    }
    got = assembled(pods, reports).status
    mat = got.materialization
    assert mat is not None
    assert (mat.enabled, mat.job, mat.phase) == (True, JOB, MaterializationPhase.RUNNING)
    assert (mat.restored, mat.refused, mat.saved_seconds, mat.key) == (2, 1, 1.5, "k1")
    per_pod = {i.pod: i.materialization for i in got.instances}
    first, refused = per_pod["llama-0"], per_pod["llama-2"]
    assert first is not None and refused is not None
    assert (first.state, first.saved_seconds, first.artifact) == ("restored", 2.0, "k1")
    assert (refused.state, refused.artifact) == ("refused", "old")
    assert refused.reason == "dtype: 'float16' != 'float32'"
    api = got.to_api()
    assert api["materialization"] == {
        "enabled": True,
        "job": JOB,
        "phase": "Running",
        "key": "k1",
        "restored": 2,
        "refused": 1,
        "savedSeconds": 1.5,
    }
    assert api["instances"][3]["materialization"] == {"state": "profiled", "key": "k1"}


def test_no_reports_no_mean_and_terminating_pods_do_not_count() -> None:
    pods = [pod(0), replace(pod(1), terminating=True)]
    reports = {"llama-1": info("restored", saved_s=3.0)}
    mat = assembled(pods, reports).status.materialization
    assert mat is not None and (mat.restored, mat.saved_seconds) == (0, None)
    # Only restores count towards the mean saved, whatever else a report carries.
    mat = assembled(pods, {"llama-0": info("profiled", saved_s=9.0)}).status.materialization
    assert mat is not None and mat.saved_seconds is None


def test_the_key_is_the_newest_reporting_instances() -> None:
    old = replace(pod(0), created=NOW - timedelta(hours=1))
    new = replace(pod(1), created=NOW)
    reports = {"llama-0": info("profiled", key="a"), "llama-1": info("profiled", key="b")}
    mat = assembled([old, new], reports).status.materialization
    assert mat is not None and mat.key == "b"
    # A worker that does not answer keeps its last report (as startup does).
    again = assembled([old, new], {}, previous=assembled([old, new], reports).status)
    assert [i.materialization.key for i in again.status.instances if i.materialization] == [
        "a",
        "b",
    ]


def test_disabled_and_invalid_spec() -> None:
    mat = assembled([pod(0)], shown=JobShown(enabled=False)).status.materialization
    assert mat is not None and (mat.enabled, mat.job, mat.phase) == (False, None, None)
    # No Job decision this tick (invalid spec): the Job side stays as stored.
    stored = assembled([pod(0)]).status
    kept = assembled([pod(0)], shown=None, previous=stored).status.materialization
    assert kept is not None and (kept.job, kept.phase) == (JOB, MaterializationPhase.RUNNING)
    # Never enabled, never decided: no status.materialization at all.
    assert assembled([pod(0)], shown=None).status.materialization is None


def test_job_outcome_events_are_told_once_per_job() -> None:
    running = assembled([pod(0)])
    assert mat_events(running) == []
    done = assembled(
        [pod(0)], shown=replace(RUNNING, phase=MaterializationPhase.SUCCEEDED),
        previous=running.status,
    )  # fmt: skip
    assert [(e.type, e.reason) for e in mat_events(done)] == [("Normal", "Materialized")]
    again = assembled(
        [pod(0)], shown=replace(RUNNING, phase=MaterializationPhase.SUCCEEDED),
        previous=done.status,
    )  # fmt: skip
    assert mat_events(again) == [] and again.patch(done.status) is None
    failed_job = JobShown(True, "llama-materialize-ffff", MaterializationPhase.FAILED, "Boom: x")
    failed = assembled([pod(0)], shown=failed_job, previous=done.status)
    (note,) = mat_events(failed)
    assert (note.type, note.reason) == ("Warning", "MaterializationFailed")
    assert "llama-materialize-ffff" in note.message and "Boom: x" in note.message
    assert mat_events(assembled([pod(0)], shown=failed_job, previous=failed.status)) == []


def test_a_refusal_is_told_once_per_pod_and_artifact() -> None:
    refused = {"llama-0": info("refused", artifact="old", reason="model_digest: 'x' != 'y'")}
    first = assembled([pod(0)], refused)
    (note,) = mat_events(first)
    assert (note.type, note.reason) == ("Warning", "MaterializationRefused")
    assert "llama-0" in note.message and "model_digest: 'x' != 'y'" in note.message
    # The same report again, or the worker silent: nothing more.
    assert mat_events(assembled([pod(0)], refused, previous=first.status)) == []
    assert mat_events(assembled([pod(0)], {}, previous=first.status)) == []
    # Another artifact refused by the same pod, or the same one by another pod: told.
    other = {"llama-0": info("refused", artifact="older", reason="r")}
    assert len(mat_events(assembled([pod(0)], other, previous=first.status))) == 1
    both = refused | {"llama-1": info("refused", artifact="old", reason="r")}
    told = mat_events(assembled([pod(0), pod(1)], both, previous=first.status))
    assert [e.message.split(" ")[0] for e in told] == ["llama-1"]


def test_a_field_gone_inside_status_materialization_is_patched_to_null() -> None:
    """A merge patch merges objects: a Job that is no more must be sent as null."""
    enabled = assembled([pod(0)], {"llama-0": info("restored", saved_s=1.0)})
    disabled = assembled([pod(0)], shown=JobShown(enabled=False), previous=enabled.status)
    patch = disabled.patch(enabled.status)
    assert patch is not None
    assert patch["materialization"] == {
        "enabled": False,
        "job": None,
        "phase": None,
        "key": "k1",  # kept: the last key reported
        "restored": 1,
        "refused": 0,
        "savedSeconds": 1.0,
    }
