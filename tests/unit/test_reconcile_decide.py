"""The reconcile's pure decision, tick by tick: each tick observes a small world, decides,
and the test applies the actions the way the API server and the kubelet would before the
next tick (create, delete, replace a failed pod, host copies, the profile Job, the
status), like the autoscaler policy's tick tests. No cluster, no clients."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from operator_fixtures import CFG, GW_UP, NOW, REF, md_body

from cascade_api import constants as c
from cascade_operator.materialization import JobView
from cascade_operator.observed import GatewayView, PodView
from cascade_operator.reconcile import Actions, Observation, decide
from cascade_operator.spec import parse_spec

Body = dict[str, Any]


@dataclass
class World:
    """The objects one deployment owns, as the API server would hold them."""

    spec: Body
    generation: int = 1
    status: Body = field(default_factory=dict)
    pods: dict[str, Body] = field(default_factory=dict)
    jobs: dict[str, Body] = field(default_factory=dict)
    policies: dict[str, Body] = field(default_factory=dict)
    gateway: GatewayView = field(default_factory=GatewayView)

    def tick(self, **seen: Any) -> Actions:
        """Observe, decide, and apply what was decided (the status written as is)."""
        views = [PodView.of(p) for p in self.pods.values()]
        obs = Observation(
            REF,
            self.generation,
            self.status,
            pods=[p for p in views if not p.host_copy],
            hosts=[p for p in views if p.host_copy],
            gateway=self.gateway,
            jobs=[JobView.of(j) for j in self.jobs.values()],
            policies=list(self.policies.values()),
        )
        actions = decide(replace(obs, **seen), parse_spec(self.spec), CFG)
        for name in [*actions.force_delete, *actions.delete_pods]:
            self.pods.pop(name)
        for manifest in actions.create_pods:
            self.pods[manifest["metadata"]["name"]] = manifest
        for name in actions.delete_jobs:
            self.jobs.pop(name)
        for manifest in actions.create_jobs:
            self.jobs[manifest["metadata"]["name"]] = manifest
        for manifest in actions.apply:
            if manifest["kind"] == "NetworkPolicy":
                self.policies[manifest["metadata"]["name"]] = manifest
            if manifest["kind"] in ("Deployment", "Service"):
                self.gateway = GW_UP
        self.status = actions.status_update(NOW).status.to_api()
        return actions

    def kubelet(self, name: str, *, ready: bool = True, phase: str = "Running") -> None:
        """The pod placed and started; Ready as told."""
        pod = self.pods[name]
        pod["spec"]["nodeName"] = "n0"
        cond = {"type": "Ready", "status": "True" if ready else "False"}
        pod["status"] = {"phase": phase, "podIP": "10.0.0.1", "conditions": [cond]}

    def scale(self, replicas: int) -> None:
        self.spec = {**self.spec, "replicas": replicas}
        self.generation += 1


def spec(replicas: int, **fields: Any) -> Body:
    """A spec without host copies unless asked (the CRD's default keeps one)."""
    return dict(md_body(replicas, **({"hostCopies": 0} | fields))["spec"])


def names(manifests: list[Body]) -> list[str]:
    return [m["metadata"]["name"] for m in manifests]


def condition(world: World, type_: str) -> tuple[str, str]:
    cond = next(cd for cd in world.status["conditions"] if cd["type"] == type_)
    return cond["status"], cond["reason"]


def test_create_then_wait_then_ready() -> None:
    world = World(spec(2))
    first = world.tick()
    assert names(first.create_pods) == ["llama-0", "llama-1"]
    # the first reads storage, the second awaits a ScalePlan from it
    starts = [m["metadata"]["annotations"][f"{c.GROUP}/start"] for m in first.create_pods]
    assert starts == ["storage", "await"]
    assert {m["kind"] for m in first.apply} >= {"Deployment", "Service", "NetworkPolicy"}
    assert [e.reason for e in first.events] == ["ScalingUp"]
    assert world.status["replicas"] == 0  # the status tells what this tick observed
    # Nothing changed: nothing to do, the gateway and the policies stay as they are.
    second = world.tick()
    assert (second.create_pods, second.delete_pods, second.apply) == ([], [], [])
    assert (world.status["replicas"], world.status["readyReplicas"]) == (2, 0)
    world.kubelet("llama-0")
    world.kubelet("llama-1")
    world.tick()
    assert world.status["readyReplicas"] == 2
    assert condition(world, "Available")[0] == "True"


def test_delete_gives_up_the_least_loaded_instance() -> None:
    world = World(spec(3))
    world.tick()
    for name in list(world.pods):
        world.kubelet(name)
    world.tick()
    world.scale(1)
    down = world.tick(in_flight={"llama-0": 2, "llama-1": 0, "llama-2": 5})
    assert sorted(down.delete_pods) == ["llama-0", "llama-1"] and down.create_pods == []
    assert [e.reason for e in down.events] == ["ScalingDown"]
    assert sorted(world.pods) == ["llama-2"]
    world.tick()
    assert world.status["replicas"] == 1


def test_a_failed_pod_is_replaced_under_its_lowest_free_name() -> None:
    world = World(spec(2))
    world.tick()
    world.kubelet("llama-0")
    world.kubelet("llama-1", ready=False, phase="Failed")
    again = world.tick()
    assert again.delete_pods == ["llama-1"]
    assert names(again.create_pods) == ["llama-2"]  # llama-1 still terminates
    assert [e.reason for e in again.events] == ["ScalingUp", "ReplacingInstances"]
    # A healthy instance exists, so the replacement awaits its weights from it.
    assert again.create_pods[0]["metadata"]["annotations"][f"{c.GROUP}/start"] == "await"


def test_host_copies_are_kept_beside_the_instances() -> None:
    world = World(spec(1, hostCopies=1))
    first = world.tick()
    assert sorted(names(first.create_pods)) == ["llama-0", "llama-host-0"]
    assert {e.reason for e in first.events} == {"ScalingUp", "HostCopyCreated"}
    world.kubelet("llama-host-0")
    assert world.tick().create_pods == []
    world.spec = {**world.spec, "hostCopies": 0}
    world.generation += 1
    gone = world.tick()
    assert gone.delete_pods == ["llama-host-0"]
    assert [e.reason for e in gone.events] == ["HostCopyRemoved"]


def test_the_profile_job_is_made_once_and_shown() -> None:
    world = World(spec(1, materialization={"enabled": True}))
    first = world.tick()
    (job,) = names(first.create_jobs)
    assert "MaterializationStarted" in [e.reason for e in first.events]
    assert world.status["materialization"]["job"] == job
    assert world.tick().create_jobs == []  # the Job exists: not made again
    world.spec = {**world.spec, "materialization": {"enabled": False}}
    world.generation += 1
    assert world.tick().delete_jobs == [job]


def test_an_invalid_spec_changes_no_pod_and_says_why() -> None:
    world = World(spec(1))
    world.tick()
    world.spec = {**world.spec, "model": {"uri": "file:///etc"}}
    world.generation += 1
    actions = decide(
        Observation(REF, world.generation, world.status, [PodView.of(world.pods["llama-0"])]),
        parse_spec(world.spec, ("/var/lib/cascade/models",)),
        CFG,
    )
    assert (actions.create_pods, actions.delete_pods, actions.create_jobs) == ([], [], [])
    status = actions.status_update(NOW).status.to_api()
    degraded = next(cd for cd in status["conditions"] if cd["type"] == "Degraded")
    assert degraded["status"] == "True" and "spec.model.uri" in degraded["message"]


def test_pods_on_lost_nodes_go_first_and_are_replaced_at_once() -> None:
    world = World(spec(1))
    world.tick()
    world.kubelet("llama-0")
    lost = PodView.of(world.pods["llama-0"])
    actions = world.tick(pods=[], lost=[lost])
    assert actions.force_delete == ["llama-0"]
    assert names(actions.create_pods) == ["llama-0"]  # after the forced delete
    assert [e.reason for e in actions.events] == ["ScalingUp", "NodeLost"]


def test_the_api_servers_refusals_are_added_to_the_status_at_write_time() -> None:
    world = World(spec(1))
    actions = world.tick()
    update = actions.status_update(NOW, refused="the API server refused: create pod llama-0")
    degraded = next(cd for cd in update.status.conditions if cd.type == "Degraded")
    assert degraded.status == "True" and "create pod llama-0" in degraded.message
