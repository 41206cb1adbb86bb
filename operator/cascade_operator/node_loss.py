"""Which nodes are lost, and so which pods to take back at once (pure).

A node whose kubelet stopped heart-beating turns Ready Unknown (or False) after the node
lifecycle controller's grace period (`--node-monitor-grace-period`, 40 s by default),
but its pods stay Running in the API until eviction five minutes later, and a deleted
one stays Terminating forever (no kubelet confirms it). An inference instance loses
nothing by being replaced (the gateway re-runs its requests elsewhere), so once a node
has been not Ready for `LOST_AFTER_S` more, the operator force-deletes its pods and
creates replacements on other nodes in the same reconcile. A node that comes back finds
them gone and stops their processes.

Unless most nodes look lost at once: that is the control plane's trouble, not the nodes'
(after an API server outage every lease looks stale until the kubelets renew them), and
replacing every pod would turn a blip into an outage. Like the node lifecycle
controller's full-disruption mode, nothing is taken back then.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from cascade_operator.events import EventNote
from cascade_operator.observed import PodView, parse_time

Body = dict[str, Any]
LOST_AFTER_S = 10.0


def lost_nodes(nodes: Iterable[Body], now: datetime, after_s: float = LOST_AFTER_S) -> set[str]:
    """Nodes whose Ready condition has not been True for at least `after_s` seconds;
    none when more than half of the nodes are (a control-plane disruption)."""
    lost, total = set(), 0
    for node in nodes:
        total += 1
        meta, status = node.get("metadata") or {}, node.get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        if ready is None or ready.get("status") == "True":
            continue
        since = parse_time(ready.get("lastTransitionTime"))
        if since is not None and (now - since).total_seconds() >= after_s:
            lost.add(str(meta.get("name")))
    return lost if 2 * len(lost) <= total else set()


def on_lost_nodes(pods: Sequence[PodView], lost: set[str]) -> list[PodView]:
    """The pods (terminating ones too: they never finish there) placed on lost nodes."""
    return [p for p in pods if p.node is not None and p.node in lost]


def lost_event(pods: Sequence[PodView]) -> EventNote:
    nodes = ", ".join(sorted({p.node or "" for p in pods}))
    names = ", ".join(p.name for p in pods)
    return EventNote("Warning", "NodeLost", f"node {nodes} not ready: replacing pods {names}")
