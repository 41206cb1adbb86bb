"""Which nodes are lost, and so which pods to take back at once (pure).

A node whose kubelet stopped heart-beating turns Ready Unknown (or False) after the node
lifecycle controller's grace period (`--node-monitor-grace-period`, 40 s by default),
but its pods stay Running in the API until eviction five minutes later, and a deleted
one stays Terminating forever (no kubelet confirms it). An inference instance loses
nothing by being replaced (the gateway re-runs its requests elsewhere), so once a node
has been not Ready for `LOST_AFTER_S` more, the operator force-deletes its pods and
creates replacements on other nodes in the same reconcile. A node that comes back finds
them gone and stops their processes.

Unless more than half of the nodes are not Ready at once (for any time): that is the
control plane's trouble, not the nodes' (after an API server outage every lease looks
stale until the kubelets renew them), and replacing every pod would turn a blip into an
outage. Like the node lifecycle
controller's full-disruption mode, nothing is taken back then, and the disruption's end
restarts every node's clock (`calm_since`): the nodes come back Ready one by one as they
renew, and the last few, not Ready since the disruption, are not lost for it (a CI run
lost two instances that way after a 60 s API server outage).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from cascade_operator.events import EventNote
from cascade_operator.observed import PodView, parse_time

Body = dict[str, Any]
LOST_AFTER_S = 10.0


def lost_nodes(
    nodes: Iterable[Body],
    now: datetime,
    after_s: float = LOST_AFTER_S,
    calm_since: datetime | None = None,
) -> set[str]:
    """Nodes whose Ready condition has not been True for at least `after_s` seconds since
    the later of its transition and `calm_since` (the end of the last disruption seen);
    none when more than half of the nodes are not Ready (a disruption)."""
    nodes = list(nodes)
    if disrupted(nodes):
        return set()
    lost = set()
    for node in nodes:
        since = _not_ready_since(node)
        if since is not None and calm_since is not None:
            since = max(since, calm_since)
        if since is not None and (now - since).total_seconds() >= after_s:
            lost.add(str((node.get("metadata") or {}).get("name")))
    return lost


def disrupted(nodes: Sequence[Body]) -> bool:
    """More than half of the nodes not Ready: the control plane's trouble."""
    return 2 * sum(_not_ready(n) for n in nodes) > len(nodes)


def _ready(node: Body) -> Body | None:
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), None)


def _not_ready(node: Body) -> bool:
    ready = _ready(node)
    return ready is not None and ready.get("status") != "True"


def _not_ready_since(node: Body) -> datetime | None:
    ready = _ready(node)
    if ready is None or ready.get("status") == "True":
        return None
    return parse_time(ready.get("lastTransitionTime"))


def on_lost_nodes(pods: Sequence[PodView], lost: set[str]) -> list[PodView]:
    """The pods (terminating ones too: they never finish there) placed on lost nodes."""
    return [p for p in pods if p.node is not None and p.node in lost]


def lost_event(pods: Sequence[PodView]) -> EventNote:
    nodes = ", ".join(sorted({p.node or "" for p in pods}))
    names = ", ".join(p.name for p in pods)
    return EventNote("Warning", "NodeLost", f"node {nodes} not ready: replacing pods {names}")
