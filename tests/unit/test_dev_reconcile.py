"""The API side of `cascade dev up`'s reconcile: draining, deleting and relabelling nodes."""

from __future__ import annotations

from typing import Any

from cascade_dev import reconcile
from cascade_dev.clusterdiff import AgentRestarted, Change, NodeRemoved, Relabeled
from cascade_dev.kubeapi import KubeApi

POD_PATH = "/api/v1/namespaces/default/pods/"


class FakeApi(KubeApi):
    """Nodes and pods in memory; a graceful pod delete takes effect after `lag` lists."""

    def __init__(  # no TLS: nothing is dialled
        self, pods: dict[str, str], nodes: set[str], lag: int | None = 1
    ) -> None:
        self.pods = dict(pods)  # pod name -> node
        self.nodes = set(nodes)
        self.lag = lag  # None: a graceful delete never completes (no agent stops the pod)
        self.dying: dict[str, int] = {}
        self.calls: list[tuple[str, str, object]] = []

    def request(
        self, method: str, path: str, timeout: float = 5.0, body: object = None
    ) -> tuple[int, str]:
        name = path.rsplit("/", 1)[-1]
        return (200 if name in self.nodes else 404), ""

    def get(self, path: str) -> dict[str, Any]:
        node = path.split("spec.nodeName%3D", 1)[1]
        for pod, left in list(self.dying.items()):
            if left <= 0:
                self.pods.pop(pod, None)
                del self.dying[pod]
            else:
                self.dying[pod] = left - 1
        items = [
            {"metadata": {"namespace": "default", "name": p}}
            for p, n in sorted(self.pods.items())
            if n == node
        ]
        return {"items": items}

    def patch(self, path: str, body: object) -> None:
        self.calls.append(("PATCH", path, body))

    def delete(self, path: str) -> None:
        self.calls.append(("DELETE", path, None))
        if path.startswith(POD_PATH):
            name, _, query = path.removeprefix(POD_PATH).partition("?")
            if query == "gracePeriodSeconds=0":
                self.pods.pop(name, None)
            elif self.lag is not None:
                self.dying.setdefault(name, self.lag)


def test_served_node_is_cordoned_and_its_pods_end_gracefully() -> None:
    api = FakeApi(
        {"a": "cascade-node-3", "b": "cascade-node-3", "c": "cascade-node-0"}, {"cascade-node-3"}
    )
    changes: list[Change] = [NodeRemoved("cascade-node-3", served=True), AgentRestarted()]
    reconcile.drain(api, changes, agent_running=True, timeout=10)
    assert api.calls[0] == (
        "PATCH",
        "/api/v1/nodes/cascade-node-3",
        {"spec": {"unschedulable": True}},
    )
    deletes = [path for method, path, _ in api.calls if method == "DELETE"]
    assert deletes == [POD_PATH + "a", POD_PATH + "b"]  # graceful, no force needed
    assert api.pods == {"c": "cascade-node-0"}


def test_pods_that_do_not_end_are_forced_after_the_timeout() -> None:
    api = FakeApi({"a": "cascade-node-3"}, {"cascade-node-3"}, lag=None)
    reconcile.drain(api, [NodeRemoved("cascade-node-3", True)], True, timeout=0.2)
    deletes = [path for method, path, _ in api.calls if method == "DELETE"]
    assert deletes == [POD_PATH + "a", POD_PATH + "a?gracePeriodSeconds=0"]
    assert api.pods == {}


def test_unserved_node_has_its_pods_deleted_at_once() -> None:
    """No agent would stop them: waiting for a graceful end would only time out."""
    for served, running in ((False, True), (True, False)):
        api = FakeApi({"a": "cascade-node-7"}, set(), lag=None)
        reconcile.drain(api, [NodeRemoved("cascade-node-7", served)], running, timeout=30)
        assert api.calls == [("DELETE", POD_PATH + "a?gracePeriodSeconds=0", None)]  # no cordon


def test_finish_deletes_removed_nodes_and_patches_labels() -> None:
    api = FakeApi({}, set())
    relabel = Relabeled("cascade-node-0", (("cascade.dev/nic-in-mbit", "1000", "200"),))
    reconcile.finish(api, [NodeRemoved("cascade-node-3", True), relabel, AgentRestarted()])
    assert api.calls == [
        ("DELETE", "/api/v1/nodes/cascade-node-3", None),
        ("DELETE", f"{reconcile.LEASES}/cascade-node-3", None),
        ("PATCH", "/api/v1/nodes/cascade-node-0", relabel.patch()),
    ]
