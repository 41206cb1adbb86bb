"""Which pods and gateway objects a deployment needs: scaling up and down, lowest free
ordinals, start modes, failed pods, invalid specs, the gateway refresh."""

from __future__ import annotations

from typing import Any

import pytest
from operator_fixtures import CFG, md, observe, pod

from cascade_operator.instances import decide, free_indices, scale_down_victims, start_modes
from cascade_operator.observed import GatewayView
from cascade_operator.spec import parse_spec

GATEWAY_KINDS = ["ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"]


def names(manifests: list[dict[str, Any]]) -> list[str]:
    return [m["metadata"]["name"] for m in manifests]


def serve_env(manifest: dict[str, Any]) -> str:
    env = manifest["spec"]["containers"][0]["env"]
    return str(next(e["value"] for e in env if e["name"] == "CASCADE_SERVE"))


def test_fresh_deployment_creates_pods_and_gateway() -> None:
    d = decide(observe(status={}, gateway=GatewayView()), md(replicas=2), CFG)
    assert names(d.create_pods) == ["llama-0", "llama-1"]
    assert [m["kind"] for m in d.gateway] == GATEWAY_KINDS
    assert [e.reason for e in d.events] == ["ScalingUp"]


def test_converged_is_a_no_op() -> None:
    d = decide(observe([pod(0), pod(1)]), md(replicas=2), CFG)
    assert (d.create_pods, d.delete_pods, d.gateway, d.events) == ([], [], [], [])


def test_scale_up_fills_lowest_free_indices_even_around_terminating() -> None:
    pods = [pod(0), pod(1, terminating=True), pod(3)]
    assert names(decide(observe(pods), md(replicas=4), CFG).create_pods) == ["llama-2", "llama-4"]


def test_scale_down_prefers_unplaced_then_loading_then_highest_index() -> None:
    pods = [pod(0), pod(1), pod(2, ready=False), pod(3, node=None, ready=False, phase="Pending")]
    d = decide(observe(pods), md(replicas=1), CFG)
    assert d.delete_pods == ["llama-3", "llama-2", "llama-1"]
    assert any(e.reason == "ScalingDown" for e in d.events)


def test_failed_pods_are_replaced() -> None:
    d = decide(observe([pod(0), pod(1, ready=False, crash_looping=True)]), md(replicas=2), CFG)
    assert d.delete_pods == ["llama-1"]
    assert names(d.create_pods) == ["llama-2"]
    assert ("Warning", "ReplacingInstances") in [(e.type, e.reason) for e in d.events]


def test_an_invalid_spec_changes_nothing_that_runs() -> None:
    parsed = parse_spec(
        {"model": {"uri": "file:///m"}, "replicas": 3, "scaling": {"maxReplicas": 2}}
    )
    assert parsed.spec is not None and parsed.accepted is None
    d = decide(observe([pod(0)]), parsed.accepted, CFG)
    assert (d.create_pods, d.delete_pods, d.gateway, d.events) == ([], [], [], [])


def test_spec_change_refreshes_gateway() -> None:
    d = decide(observe([pod(0)], generation=3), md(replicas=1), CFG)
    assert [m["kind"] for m in d.gateway] == GATEWAY_KINDS


def test_helpers() -> None:
    assert free_indices([pod(0), pod(2)], 3) == [1, 3, 4]
    assert [p.name for p in scale_down_victims([pod(0), pod(5)], 1)] == ["llama-5"]


def test_first_instance_loads_from_storage_the_rest_await_weights() -> None:
    d = decide(observe(), md(replicas=3), CFG)
    assert [serve_env(m) for m in d.create_pods] == ["1", "await", "await"]
    starts = [m["metadata"]["annotations"]["cascade.dev/start"] for m in d.create_pods]
    assert starts == ["storage", "await", "await"]


def test_scale_up_from_a_running_instance_streams_to_every_new_pod() -> None:
    d = decide(observe([pod(0)]), md(replicas=6), CFG)
    assert len(d.create_pods) == 5
    assert {serve_env(m) for m in d.create_pods} == {"await"}


def test_start_modes() -> None:
    assert start_modes(False, 0) == []
    assert start_modes(False, 2) == ["storage", "await"]
    assert start_modes(True, 1) == ["await"]


def test_new_instances_await_a_host_copy_instead_of_reading_storage() -> None:
    d = decide(observe([]), md(replicas=2), CFG, has_copy=True)
    assert [m["metadata"]["annotations"]["cascade.dev/start"] for m in d.create_pods] == [
        "await",
        "await",
    ]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"scaling": {"minReplicas": 5, "maxReplicas": 2}}, "spec.scaling.minReplicas"),
        ({"scaling": {"maxReplicas": 2}, "replicas": 3}, "spec.replicas"),
        ({"multicast": {"blocks": 2, "k": 4}}, "spec.multicast.k"),
        ({"engine": {"maxBatchSize": "lots"}}, "spec.engine.maxBatchSize"),
    ],
)
def test_parse_spec_names_the_offending_field(spec: dict[str, Any], field: str) -> None:
    parsed = parse_spec({"model": {"uri": "file:///m"}, **spec})
    assert parsed.accepted is None
    assert any(field in p.message for p in parsed.problems)


def test_scale_down_gives_up_the_least_loaded_serving_instances() -> None:
    pods = [pod(0), pod(1), pod(2), pod(3)]
    load = {"llama-0": 5, "llama-1": 0, "llama-2": 9, "llama-3": 2}
    victims = scale_down_victims(pods, 2, in_flight=load)
    assert [p.name for p in victims] == ["llama-1", "llama-3"]
