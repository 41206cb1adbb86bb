"""The NetworkPolicies of one ModelDeployment: who may reach its workers and its gateway.

A pod that a policy selects is isolated for ingress: only what some policy allows gets
in. Two policies per deployment allow exactly this:

- `<md>-workers` selects the pods that run the worker process (instances, host copies,
  the profile Job). Their HTTP port (WORKER_PORT: the control API and generate) is open
  to the operator's pods and the deployment's gateway pods. Every port is open to the
  deployment's own instances and host copies: the data and pipeline listeners
  (DATA_PORT, PIPELINE_PORT) and also the ephemeral ports UCX's TCP transport listens on
  for its lanes (a peer connects to the listener, then to those; seen with ucxx 0.52 over
  `tcp`), so that rule names no port.
- `<md>-gateway` opens the gateway's port to every source: it is the user-facing OpenAI
  API (put an ingress or a policy of your own in front of it to narrow that).

The operator is named by its namespace (the `kubernetes.io/metadata.name` label the API
server puts on every namespace since 1.21) and its pods' labels (the chart's selector
labels, OperatorConfig). Egress is not restricted, and kubelet probes come from the node,
which most CNIs let through. The policies are owned by the ModelDeployment (collected
with it) and labelled like its other objects; `changed` says which to create or patch
back to what is built here. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cascade_api import constants as c
from cascade_operator.builders import labels, owner_reference, selector_labels
from cascade_operator.config import OperatorConfig
from cascade_operator.observed import MdRef

Manifest = dict[str, Any]

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Pods that run the worker process, and those of them that move weights and activations.
PROCESS_COMPONENTS = (c.COMPONENT_WORKER, c.COMPONENT_HOST_COPY, c.COMPONENT_MATERIALIZE)
PEER_COMPONENTS = (c.COMPONENT_WORKER, c.COMPONENT_HOST_COPY)


def workers_policy_name(md: str) -> str:
    return f"{md}-workers"


def gateway_policy_name(md: str) -> str:
    return f"{md}-gateway"


def policy_selector(md: str) -> str:
    """The label selector of one deployment's NetworkPolicies."""
    return f"{c.LABEL_DEPLOYMENT}={md},{c.LABEL_MANAGED_BY}={c.MANAGED_BY}"


def _components(md: str, components: Iterable[str]) -> Manifest:
    """A pod selector: this deployment's pods of any of `components`."""
    return {
        "matchLabels": {c.LABEL_DEPLOYMENT: md},
        "matchExpressions": [
            {"key": c.LABEL_COMPONENT, "operator": "In", "values": list(components)}
        ],
    }


def operator_peer(cfg: OperatorConfig) -> Manifest:
    """The operator's pods: its namespace by name, its pods by the chart's labels."""
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: cfg.operator_namespace}},
        "podSelector": {"matchLabels": dict(cfg.operator_pod_labels)},
    }


def _policy(ref: MdRef, name: str, component: str, spec: Manifest) -> Manifest:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": labels(ref.name, component),
            "ownerReferences": [owner_reference(ref)],
        },
        "spec": spec,
    }


def workers_policy(ref: MdRef, cfg: OperatorConfig) -> Manifest:
    """HTTP from the operator and the gateway; everything from the deployment's peers."""
    gateway = {"podSelector": {"matchLabels": selector_labels(ref.name, c.COMPONENT_GATEWAY)}}
    peers = {"podSelector": _components(ref.name, PEER_COMPONENTS)}
    spec = {
        "podSelector": _components(ref.name, PROCESS_COMPONENTS),
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [operator_peer(cfg), gateway],
                "ports": [{"protocol": "TCP", "port": c.WORKER_PORT}],
            },
            {"from": [peers]},  # UCX data, pipeline and transport-lane ports
        ],
    }
    return _policy(ref, workers_policy_name(ref.name), c.COMPONENT_WORKER, spec)


def gateway_policy(ref: MdRef) -> Manifest:
    """The gateway's port from anywhere: it is the deployment's public API."""
    spec = {
        "podSelector": {"matchLabels": selector_labels(ref.name, c.COMPONENT_GATEWAY)},
        "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"protocol": "TCP", "port": c.GATEWAY_PORT}]}],
    }
    return _policy(ref, gateway_policy_name(ref.name), c.COMPONENT_GATEWAY, spec)


def network_policies(ref: MdRef, cfg: OperatorConfig) -> list[Manifest]:
    return [workers_policy(ref, cfg), gateway_policy(ref)]


def changed(desired: list[Manifest], observed: list[Manifest]) -> list[Manifest]:
    """The desired policies that are missing or whose spec someone changed (or an older
    operator built): what to create or patch back. Matching ones cost no API write."""
    found = {o["metadata"]["name"]: o.get("spec") for o in observed}
    return [d for d in desired if found.get(d["metadata"]["name"]) != d["spec"]]
