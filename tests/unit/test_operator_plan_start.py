"""A plan starts the moment its first target answers: the controller remembers running
pods whose worker did not answer, the starting-pod probe (handlers.poll_starting) asks
just them, and the reconcile it triggers makes and dispatches the plan in one go."""

from __future__ import annotations

from operator_fixtures import REF
from test_operator_from_peers import idle, one_to_three, plans, run, tick

from cascade_api.scaleplan import PlanPhase


def test_a_starting_worker_is_probed_until_it_answers_then_its_plan_is_sent_at_once() -> None:
    controller, cluster, workers, _ = one_to_three(from_peers=True)
    ns, md = REF.namespace, REF.name
    assert not controller.answering(ns, md)  # no pod runs without answering: no probe
    run(cluster, workers, "llama-1", idle("llama-1"))
    answer = workers.by_ip.pop("10.0.0.2")  # its pod runs; its worker does not answer yet
    tick(controller)
    assert plans(cluster) == [] and not controller.answering(ns, md)
    workers.by_ip["10.0.0.2"] = answer  # it listens now: the probe sees it
    assert controller.answering(ns, md)
    sent = len(workers.sent)
    tick(controller)  # the reconcile the probe triggers: the plan is made and dispatched
    (plan,) = plans(cluster)
    assert plan["spec"]["targets"] == ["llama-1"]  # llama-2 (not running yet) is not waited for
    assert plan["status"]["phase"] == PlanPhase.RUNNING
    assert {o.pod for o in workers.sent[sent:]} == {"llama-0", "llama-1"}
    assert not controller.answering(ns, md)
