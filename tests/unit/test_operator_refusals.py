"""The API server refusing the controller's writes: a refusal worth retrying (409, 429,
5xx) is retried by the 1 s timer within seconds, with a capped backoff, instead of at
the next event or the 30 s resync; one that retrying cannot mend (422) sets `Degraded`
naming the call and the server's message; and nothing else of the reconcile is lost.
Tick by tick, on a fake clock, against the in-memory API server."""

from __future__ import annotations

import pytest
from operator_fixtures import REF, FakeCluster, FakeWorkers, md_body

from cascade_api import constants as c
from cascade_operator.builders import worker_selector
from cascade_operator.config import OperatorConfig
from cascade_operator.controller import Controller
from cascade_operator.refusals import FIRST_RETRY_S, SHOWN_AFTER, Retries, degraded_message
from cascade_operator.refusals import Refusal as R

CONFLICT = 'Operation cannot be fulfilled on pods "llama-0": the object has been modified'


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def world(replicas: int) -> tuple[Controller, FakeCluster, Clock]:
    """No host copy: nothing else moves weights, so only a retry makes the timer fire."""
    cluster, clock = FakeCluster(), Clock()
    cluster.add(c.MD_KIND, md_body(replicas, hostCopies=0))
    cfg = OperatorConfig()
    controller = Controller(cluster, cfg, FakeWorkers(), clock=clock)  # type: ignore[arg-type]
    return controller, cluster, clock


def pods(cluster: FakeCluster) -> list[str]:
    return [
        p["metadata"]["name"] for p in cluster.list_pods(REF.namespace, worker_selector(REF.name))
    ]


def degraded(cluster: FakeCluster) -> dict[str, str]:
    body = cluster.get_md(REF.namespace, REF.name)
    assert body is not None
    (cond,) = [c for c in body["status"]["conditions"] if c["type"] == "Degraded"]
    return dict(cond)


def due(controller: Controller) -> bool:
    return controller.due(REF.namespace, REF.name)


@pytest.mark.parametrize("status", [409, 429, 503])
def test_a_refused_pod_create_is_retried_within_seconds_not_at_the_resync(status: int) -> None:
    controller, cluster, clock = world(1)
    cluster.refuse_next("create_pod", status, CONFLICT)
    controller.reconcile(REF.namespace, REF.name)
    assert pods(cluster) == []
    # The gateway and the status were written all the same.
    assert ("Deployment", REF.namespace, "llama-gateway") in cluster.objects
    assert degraded(cluster)["status"] == "False"  # one conflict is no degradation
    assert not due(controller)
    clock.now += FIRST_RETRY_S
    assert due(controller)  # the 1 s timer reconciles now: 1 s after, not 30 s
    controller.reconcile(REF.namespace, REF.name)
    assert pods(cluster) == ["llama-0"]
    assert controller.retries.attempts == {}  # it went through: no more retries


def test_a_refusal_that_persists_backs_off_and_then_shows_in_degraded() -> None:
    controller, cluster, clock = world(1)
    waits = []
    for _ in range(SHOWN_AFTER):
        cluster.refuse_next("create_pod", 503, "etcdserver: request timed out")
        controller.reconcile(REF.namespace, REF.name)
        began = clock.now
        while not due(controller):
            clock.now += 0.25
        waits.append(clock.now - began)
    assert waits == [1.0, 2.0, 4.0]
    cond = degraded(cluster)
    assert (cond["status"], cond["reason"]) == ("True", "APIRefused")
    assert "create pod llama-0: 503 etcdserver: request timed out" in cond["message"]
    controller.reconcile(REF.namespace, REF.name)  # the server is back
    assert pods(cluster) == ["llama-0"]
    assert degraded(cluster)["status"] == "False"


def test_a_refusal_retrying_cannot_mend_sets_degraded_at_once_and_waits_for_a_change() -> None:
    controller, cluster, _ = world(2)
    message = 'Pod "llama-0" is invalid: spec.containers[0].resources.requests: Invalid value'
    cluster.refuse_next("create_pod", 422, message)
    controller.reconcile(REF.namespace, REF.name)
    assert pods(cluster) == ["llama-1"]  # the other instance is made all the same
    cond = degraded(cluster)
    assert (cond["status"], cond["reason"]) == ("True", "APIRefused")
    assert f"create pod llama-0: 422 {message}" in cond["message"]
    assert controller.retries.attempts == {}  # the next event or resync tries again


def test_the_retry_schedule_is_per_deployment_and_resets_on_success() -> None:
    retries, a, b = Retries(), ("ns", "a"), ("ns", "b")
    refused = [R("create pod a-0", 409, "conflict")]
    assert retries.ended(a, refused, 0.0) == 1
    assert retries.ended(a, refused, 1.0) == 2  # due at 1 + 2 s
    assert not retries.due(a, 2.9) and retries.due(a, 3.0)
    assert not retries.due(b, 100.0)
    assert retries.ended(a, [], 3.0) == 0
    assert not retries.due(a, 100.0)
    for _ in range(10):
        retries.ended(b, refused, 0.0)
    assert retries.due_at[b] == 16.0  # capped


def test_only_what_retrying_cannot_mend_shows_before_the_third_try() -> None:
    conflict, invalid = R("create pod a-0", 409, "conflict"), R("apply Service a", 422, "bad")
    assert degraded_message([conflict], attempts=1) is None
    assert (
        degraded_message([conflict, invalid], 1)
        == "the API server refused: apply Service a: 422 bad"
    )
    assert degraded_message([conflict], SHOWN_AFTER) == (
        "the API server refused: create pod a-0: 409 conflict"
    )
