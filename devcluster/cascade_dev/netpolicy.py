"""NetworkPolicy ingress rules for one pod, as an nftables ruleset for its namespace.

The dev cluster's fabric is plain bridges; this is what a CNI's policy agent (Calico's
Felix, Cilium) does on a real cluster: from the policies, pods and namespaces the API
server holds, which sources may reach a pod on which ports. Kubernetes semantics
(networking.k8s.io/v1): a pod selected by some policy whose `policyTypes` include
Ingress (or that has `ingress` rules and no `policyTypes`) is isolated; then only what
one of those policies' rules allows gets in, the union of them all. A rule with no
`from` admits every source and one with no `ports` every port; a peer is a
`podSelector` (pods of the policy's namespace), a `namespaceSelector` (every pod of the
matching namespaces; with a `podSelector` too, only those pods) or an `ipBlock`. Named
ports resolve against the target pod's container ports. Every namespace carries the
`kubernetes.io/metadata.name` label, as API servers >= 1.21 set it (the dev cluster's
1.20 does not). Replies to the pod's own connections, loopback and the node addresses
(kubelet probes; host processes, which most CNIs also let through) always get in. Egress
is not enforced. Pure: objects in, ruleset text out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
TABLE = "cascade_policy"


@dataclass(frozen=True)
class Allow:
    """One admitted flow: sources (None: any) to ports (None: any)."""

    sources: tuple[str, ...] | None  # addresses and CIDRs
    excepts: tuple[str, ...] = ()  # CIDRs an ipBlock carves out of its source
    ports: tuple[tuple[str, int, int], ...] | None = None  # (protocol, first, last)


def selects(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """A label selector (matchLabels, matchExpressions) against labels; {} selects all."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
        held = key in labels
        if op == "In" and not (held and labels[key] in values):
            return False
        if op == "NotIn" and held and labels[key] in values:
            return False
        if op == "Exists" and not held:
            return False
        if op == "DoesNotExist" and held:
            return False
    return True


def _labels(obj: Obj) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _namespace_labels(namespaces: Iterable[Obj]) -> dict[str, dict[str, str]]:
    found = {}
    for ns in namespaces:
        name = ns["metadata"]["name"]
        found[name] = {**_labels(ns), NAMESPACE_NAME_LABEL: name}
    return found


def _isolates_ingress(policy: Obj) -> bool:
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes")
    return "Ingress" in types if types else True  # absent: Ingress is always implied


def _peer_sources(peer: Obj, policy_ns: str, pods: Sequence[Obj], ns_labels: Any) -> Allow:
    block = peer.get("ipBlock")
    if block:
        return Allow((block["cidr"],), tuple(block.get("except") or ()))
    pod_sel, ns_sel = peer.get("podSelector"), peer.get("namespaceSelector")
    ips = []
    for pod in pods:
        ns = pod["metadata"].get("namespace", "default")
        ip = (pod.get("status") or {}).get("podIP")
        if not ip:
            continue
        in_ns = selects(ns_sel, ns_labels.get(ns, {})) if ns_sel is not None else ns == policy_ns
        if in_ns and (pod_sel is None or selects(pod_sel, _labels(pod))):
            ips.append(ip)
    return Allow(tuple(sorted(set(ips))))


def _ports(rule: Obj, target: Obj) -> tuple[tuple[str, int, int], ...] | None:
    ports = rule.get("ports")
    if not ports:
        return None
    named = {
        p["name"]: int(p["containerPort"])
        for c in (target.get("spec") or {}).get("containers") or []
        for p in c.get("ports") or []
        if p.get("name")
    }
    found = []
    for p in ports:
        proto, port = str(p.get("protocol") or "TCP").lower(), p.get("port")
        if port is None:
            found.append((proto, 1, 65535))
        elif isinstance(port, str) and not port.isdigit():
            if port in named:  # a name the pod does not declare admits nothing
                found.append((proto, named[port], named[port]))
        else:
            found.append((proto, int(port), int(p.get("endPort") or port)))
    return tuple(found)


def ingress_allows(
    target: Obj, policies: Iterable[Obj], pods: Sequence[Obj], namespaces: Iterable[Obj]
) -> list[Allow] | None:
    """What may reach `target`: None when no policy isolates it (everything may)."""
    ns = target["metadata"].get("namespace", "default")
    ns_labels = _namespace_labels(namespaces)
    isolating = [
        p
        for p in policies
        if p["metadata"].get("namespace", "default") == ns
        and _isolates_ingress(p)
        and selects((p.get("spec") or {}).get("podSelector", {}), _labels(target))
    ]
    if not isolating:
        return None
    allows: list[Allow] = []
    for policy in isolating:
        for rule in (policy.get("spec") or {}).get("ingress") or []:
            ports = _ports(rule, target)
            if ports == ():
                continue  # only named ports the pod lacks
            peers = rule.get("from")
            if not peers:
                allows.append(Allow(None, (), ports))
                continue
            for peer in peers:
                src = _peer_sources(peer, policy["metadata"].get("namespace", ns), pods, ns_labels)
                if src.sources:
                    allows.append(Allow(src.sources, src.excepts, ports))
    return allows


def _set(items: Iterable[str]) -> str:
    return "{ " + ", ".join(items) + " }"


def _rule(allow: Allow) -> list[str]:
    match = []
    if allow.sources is not None:
        match.append(f"ip saddr {_set(allow.sources)}")
    if allow.excepts:
        match.append(f"ip saddr != {_set(allow.excepts)}")
    if allow.ports is None:
        return [" ".join([*match, "accept"])]
    return [
        " ".join(
            [*match, f"{proto} dport {first if first == last else f'{first}-{last}'}", "accept"]
        )
        for proto, first, last in allow.ports
    ]


def ruleset(allows: list[Allow] | None, trusted: Sequence[str]) -> str:
    """An `nft -f` script that replaces the pod's policy table in one transaction: no
    table (everything admitted) when `allows` is None, else drop all but what they
    allow, replies, loopback and the `trusted` node addresses."""
    script = [f"table ip {TABLE}", f"delete table ip {TABLE}"]  # create-then-delete: no error
    if allows is None:
        return "\n".join(script) + "\n"
    rules = [
        "ct state established,related accept",
        'iifname "lo" accept',
        *([f"ip saddr {_set(trusted)} accept"] if trusted else []),
        *(line for allow in allows for line in _rule(allow)),
    ]
    body = "\n".join(f"    {r}" for r in rules)
    script.append(
        f"table ip {TABLE} {{\n  chain ingress {{\n"
        f"    type filter hook input priority filter; policy drop;\n{body}\n  }}\n}}"
    )
    return "\n".join(script) + "\n"
