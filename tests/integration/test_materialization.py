"""Issue 12, acceptance 4 (and the materialization path it guards), on the local cluster.

A deployment with `materialization.enabled` at replicas 0 and one host copy, over a
checkpoint of the test's own: the operator's profile Job records the engine's start-up
state beside the weights (`.materialized/<key>.json`). Scale 0 -> 1: the instance gets
weights and state from the host copy (it never reads storage), restores the KV sizing
instead of profiling, and reports what the restore took (measured: more than nothing,
less than the profile the Job measured in this run) and the difference as the seconds
saved. Then the recorded file is replaced by an artifact of another model digest, and
after that of another engine setting (each time the host copy is re-created from
storage, so it offers only the replacement): the next instance refuses it (status
`refused`, an Event naming why), profiles as a cold start does, and generates the same
greedy tokens.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest
from integration_helpers import Namespace, generated, model_deployment, pod_ready, small_model

from cascade_api.constants import WORKER_PORT
from cascade_dev.testing import wait_for
from cascade_protocol.materialize import MaterializedState
from cascade_protocol.status import StartupStage, WorkerStatus

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

MD = "recorded"
ASK = {"request_id": "r", "prompt": "Hello state", "params": {"max_tokens": 10, "temperature": 0}}


def host_copy_ready(ns: Namespace) -> str | None:
    """The name of a Ready host copy, if one is."""
    ready = [p["metadata"]["name"] for p in ns.host_copies(MD) if pod_ready(p)]
    return str(ready[0]) if ready else None


def start_one(ns: Namespace) -> tuple[WorkerStatus, list[int]]:
    """Scale 0 -> 1; the new instance's status and its greedy tokens."""
    ns.kubectl("scale", "md", MD, "--replicas=1")
    ns.wait_ready(MD, 1)
    (pod,) = ns.ready_pods(MD)
    base = f"http://{pod['status']['podIP']}:{WORKER_PORT}"
    tokens = generated(f"{base}/v1/generate", ASK)
    with urllib.request.urlopen(f"{base}/v1/status", timeout=10) as resp:
        status = WorkerStatus.model_validate_json(resp.read())
    return status, tokens


def scale_to_zero(ns: Namespace) -> None:
    ns.kubectl("scale", "md", MD, "--replicas=0")
    wait_for("no instance", lambda: ns.worker_pods(MD) == [], timeout=120)


def offer_only(ns: Namespace, folder: Path, state: MaterializedState) -> None:
    """Storage holds only `state`; the host copy is re-created so it offers only that."""
    for old in folder.glob("*.json"):
        old.unlink()
    (folder / f"{state.id}.json").write_text(state.model_dump_json(by_alias=True))
    old_copy = host_copy_ready(ns)
    assert old_copy is not None
    ns.kubectl("delete", "pod", old_copy, "--wait=true")
    wait_for("the host copy re-created", lambda: host_copy_ready(ns) is not None, timeout=240)


def forged(state: MaterializedState, **key: Any) -> MaterializedState:
    """A well-formed artifact (its id is its key's) recorded for another start."""
    other = state.key.model_copy(update=key)
    return state.model_copy(update={"key": other, "id": other.id})


def test_a_recorded_start_is_restored_and_a_foreign_one_refused(
    cluster: Namespace, tmp_path: Path
) -> None:
    ns = cluster
    model = small_model()
    manifest = model_deployment(
        MD, 0, model=model, hostCopies=1, scaling={"minReplicas": 0},
        engine={"maxBatchSize": 4}, materialization={"enabled": True},
    )  # fmt: skip
    ns.apply(manifest, "--validate=false")

    def recorded() -> bool:
        phase = (ns.md_status(MD).get("materialization") or {}).get("phase")
        assert phase != "Failed", ns.md_status(MD)
        return phase == "Succeeded"

    wait_for("the profile Job recorded the start-up state", recorded, timeout=300)
    folder = model / ".materialized"
    (path,) = folder.glob("*.json")
    state = MaterializedState.model_validate_json(path.read_bytes())
    print("recorded", path.name, state.key, "profile_s", state.profile_s)
    assert path.stem == state.id and state.key.max_batch == 4 and state.profile_s > 0
    wait_for("the host copy holds the model", lambda: host_copy_ready(ns) is not None, 240)

    status, before = start_one(ns)
    info, startup = status.materialization, status.startup
    print("restored:", info, startup)
    assert info is not None and info.state == "restored" and info.key == state.id
    assert info.saved_s is not None and info.saved_s > 0
    assert startup is not None and startup.weights_from == "host"
    # restored, not profiled: a measured stage, shorter than this run's profile of it
    assert 0 < startup.stages[StartupStage.KV_SIZING] < state.profile_s
    assert info.profile_s == state.profile_s
    assert info.restore_s is not None and 0 < info.restore_s < state.profile_s
    assert info.saved_s == pytest.approx(state.profile_s - info.restore_s, abs=1e-3)
    shown = ns.md_status(MD)
    (entry,) = shown["instances"]
    assert entry["materialization"]["state"] == "restored", entry
    assert shown["materialization"]["restored"] >= 1

    for what, key in (
        ("model_digest", {"model_digest": "0" * 32}),
        ("max_batch", {"max_batch": 8}),
    ):
        scale_to_zero(ns)
        offer_only(ns, folder, forged(state, **key))
        status, tokens = start_one(ns)
        info, startup = status.materialization, status.startup
        print(f"another {what}:", info)
        assert info is not None and info.state == "refused" and info.reason is not None
        assert what in info.reason
        assert startup is not None and startup.stages[StartupStage.KV_SIZING] > 0  # the cold path
        assert tokens == before

        def refused_event(pod: str = status.pod) -> bool:
            events = ns.kubectl(
                "get", "events", "--field-selector", "reason=MaterializationRefused"
            )
            return pod in events

        wait_for(f"an Event refusing {what}", refused_event, timeout=60)
