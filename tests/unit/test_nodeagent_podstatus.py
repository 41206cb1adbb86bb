"""Pod status computation of the node agent (phase, conditions, container states)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cascade_dev.nodeagent.podstatus import (
    ContainerView,
    Terminated,
    changed,
    compute_status,
    container_status,
    pod_phase,
)

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(seconds=30)


def running(name: str = "main", ready: bool = True) -> ContainerView:
    return ContainerView(
        name, "img", "cascade://img", "cascade://42", running_since=T0, ready=ready, started=True
    )


def done(name: str = "main", code: int = 0) -> ContainerView:
    return ContainerView(name, "img", terminated=Terminated(code, T1, T0, "cascade://42"))


def waiting(
    name: str = "main", reason: str = "ContainerCreating", last: Terminated | None = None
) -> ContainerView:
    return ContainerView(name, "img", waiting_reason=reason, last_terminated=last)


def pod(policy: str = "Always", status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"spec": {"restartPolicy": policy}, "status": status or {}}


@pytest.mark.parametrize(
    ("policy", "init", "app", "phase"),
    [
        ("Always", [], [waiting()], "Pending"),
        ("Always", [], [running()], "Running"),
        ("Always", [], [running("a"), waiting("b")], "Pending"),
        ("Always", [running("i")], [waiting("main", "PodInitializing")], "Pending"),
        ("Always", [done("i")], [running()], "Running"),
        ("Never", [done("i", 1)], [waiting("main", "PodInitializing")], "Failed"),
        (
            "OnFailure",
            [waiting("i", "CrashLoopBackOff", Terminated(1, T1))],
            [waiting()],
            "Pending",
        ),
        ("Never", [], [done(code=0)], "Succeeded"),
        ("Never", [], [done(code=2)], "Failed"),
        ("Never", [], [done("a", 0), done("b", 1)], "Failed"),
        ("OnFailure", [], [done(code=0)], "Succeeded"),
        ("OnFailure", [], [waiting("main", "CrashLoopBackOff", Terminated(1, T1))], "Running"),
        ("Always", [], [done(code=0)], "Running"),
        ("Always", [], [waiting("main", "CrashLoopBackOff", Terminated(0, T1))], "Running"),
        ("Never", [], [running("a"), done("b", 1)], "Running"),
    ],
)
def test_phase(
    policy: str, init: list[ContainerView], app: list[ContainerView], phase: str
) -> None:
    assert pod_phase(policy, init, app) == phase


def test_container_status_running_has_explicit_nulls() -> None:
    s = container_status(running())
    assert s["state"] == {
        "running": {"startedAt": "2024-05-01T12:00:00Z"},
        "terminated": None,
        "waiting": None,
    }
    assert s["containerID"] == "cascade://42"
    assert (s["ready"], s["started"], s["restartCount"]) == (True, True, 0)
    assert s["lastState"] == {}


def test_container_status_backoff_with_last_state() -> None:
    v = ContainerView(
        "main",
        "img",
        waiting_reason="CrashLoopBackOff",
        waiting_message="back-off 10s",
        last_terminated=Terminated(3, T1, T0, "cascade://7"),
        restart_count=2,
    )
    s = container_status(v)
    assert s["state"]["waiting"] == {"reason": "CrashLoopBackOff", "message": "back-off 10s"}
    assert s["state"]["running"] is None
    assert s["lastState"]["terminated"] == {
        "exitCode": 3,
        "reason": "Error",
        "message": None,
        "finishedAt": "2024-05-01T12:00:30Z",
        "startedAt": "2024-05-01T12:00:00Z",
        "containerID": "cascade://7",
    }
    assert s["restartCount"] == 2


def test_terminated_reason_completed() -> None:
    assert container_status(done())["state"]["terminated"]["reason"] == "Completed"


def conds(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_status_ready_pod() -> None:
    s = compute_status(
        pod(),
        [done("init")],
        [running()],
        pod_ip="198.18.0.2",
        host_ip="198.18.0.1",
        now=T1,
        start_time=T0,
    )
    assert s["phase"] == "Running"
    assert s["podIP"] == "198.18.0.2" and s["podIPs"] == [{"ip": "198.18.0.2"}]
    assert s["hostIP"] == "198.18.0.1"
    assert s["startTime"] == "2024-05-01T12:00:00Z"
    c = conds(s)
    assert {k: v["status"] for k, v in c.items()} == {
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    assert c["Ready"]["lastTransitionTime"] == "2024-05-01T12:00:30Z"
    assert [x["name"] for x in s["initContainerStatuses"]] == ["init"]


def test_conditions_clear_stale_reason() -> None:
    s = compute_status(pod(), [], [running()], pod_ip="ip", host_ip="h", now=T1, start_time=T0)
    ready = conds(s)["Ready"]
    assert ready["status"] == "True"
    assert "reason" in ready and ready["reason"] is None and ready["message"] is None


def test_status_not_ready_reasons() -> None:
    s = compute_status(
        pod(),
        [running("init")],
        [waiting("a", "PodInitializing"), waiting("b")],
        pod_ip=None,
        host_ip="h",
        now=T1,
        start_time=T0,
    )
    c = conds(s)
    assert c["Initialized"]["reason"] == "ContainersNotInitialized"
    assert c["Initialized"]["message"] == "containers with incomplete status: [init]"
    assert c["Ready"]["reason"] == "ContainersNotReady"
    assert c["ContainersReady"]["message"] == "containers with unready status: [a b]"
    assert "podIP" not in s


def test_completed_pod_conditions() -> None:
    s = compute_status(pod("Never"), [], [done()], pod_ip="ip", host_ip="h", now=T1, start_time=T0)
    c = conds(s)
    assert s["phase"] == "Succeeded"
    assert (c["Ready"]["status"], c["Ready"]["reason"]) == ("False", "PodCompleted")


def test_readiness_gates() -> None:
    p = pod()
    p["spec"]["readinessGates"] = [{"conditionType": "cascade.dev/loaded"}]
    s = compute_status(p, [], [running()], pod_ip="ip", host_ip="h", now=T1, start_time=T0)
    assert conds(s)["Ready"]["reason"] == "ReadinessGatesNotReady"
    p["status"] = {"conditions": [{"type": "cascade.dev/loaded", "status": "True"}]}
    s = compute_status(p, [], [running()], pod_ip="ip", host_ip="h", now=T1, start_time=T0)
    assert conds(s)["Ready"]["status"] == "True"


def test_last_transition_time_kept_while_status_unchanged() -> None:
    first = compute_status(pod(), [], [running()], pod_ip="ip", host_ip="h", now=T0, start_time=T0)
    later = compute_status(
        pod(status=first), [], [running()], pod_ip="ip", host_ip="h", now=T1, start_time=T0
    )
    assert conds(later)["Ready"]["lastTransitionTime"] == "2024-05-01T12:00:00Z"
    flipped = compute_status(
        pod(status=first),
        [],
        [running(ready=False)],
        pod_ip="ip",
        host_ip="h",
        now=T1,
        start_time=T0,
    )
    assert conds(flipped)["Ready"]["lastTransitionTime"] == "2024-05-01T12:00:30Z"


def test_changed_ignores_nulls_and_foreign_conditions() -> None:
    desired = compute_status(
        pod(), [], [running()], pod_ip="ip", host_ip="h", now=T0, start_time=T0
    )
    stored: dict[str, Any] = {k: v for k, v in desired.items()}
    # What the API returns: null state variants dropped, extra fields and conditions present.
    stored["containerStatuses"] = [
        {
            **{k: v for k, v in desired["containerStatuses"][0].items() if v is not None},
            "state": {"running": {"startedAt": "2024-05-01T12:00:00Z"}},
        }
    ]
    stored["conditions"] = [*desired["conditions"], {"type": "Other", "status": "True"}]
    stored["qosClass"] = "BestEffort"
    assert not changed(desired, stored)
    assert changed(desired, None)
    again = compute_status(
        pod(status=stored),
        [],
        [running(ready=False)],
        pod_ip="ip",
        host_ip="h",
        now=T1,
        start_time=T0,
    )
    assert changed(again, stored)
