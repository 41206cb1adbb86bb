"""Which pod carries which role label: the fewest relabels that reach the wanted counts.

The policy says how many instances of each role it wants (`Roles`); pods keep the role
they have while their role is not over its count (so a pod's routing changes only when
it must), and the others fill the roles short of their count, interactive first. Pods
beyond the wanted total (about to be removed by a scale-down) keep what they have.
Pods without the label (new ones) get it written even when their default (mixed) is
right, so `kubectl get pods -L cascade.dev/role` shows every role. Pure; the caller
writes the labels.
"""

from __future__ import annotations

from collections.abc import Sequence

from cascade_autoscaler.policy_types import Roles
from cascade_operator.observed import PodView
from cascade_protocol.roles import InstanceRole

ORDER = (InstanceRole.INTERACTIVE, InstanceRole.MIXED, InstanceRole.BATCH)


def relabel(pods: Sequence[PodView], wanted: Roles) -> dict[str, InstanceRole]:
    """pod name -> new role, for the pods whose label must change (alive pods only)."""
    target = {
        InstanceRole.INTERACTIVE: wanted.interactive,
        InstanceRole.MIXED: wanted.mixed,
        InstanceRole.BATCH: wanted.batch,
    }
    ordered = sorted(pods, key=lambda p: (not p.ready, p.index, p.name))  # ready pods keep first
    kept: dict[InstanceRole, int] = dict.fromkeys(InstanceRole, 0)
    loose: list[PodView] = []
    changes: dict[str, InstanceRole] = {}
    for pod in ordered:
        if kept[pod.role] < target[pod.role]:
            kept[pod.role] += 1
            if not pod.labelled:
                changes[pod.name] = pod.role
        else:
            loose.append(pod)
    for pod in loose:
        short = next((r for r in ORDER if kept[r] < target[r]), None)
        if short is None:
            break  # beyond the wanted total: leave as is
        kept[short] += 1
        if short is not pod.role or not pod.labelled:
            changes[pod.name] = short
    return changes
