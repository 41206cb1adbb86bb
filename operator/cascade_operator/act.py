"""A reconcile's writes: each decision's calls made, each refusal kept instead of raised.

One refused create (a conflict, a throttled or failing API server, an object the server
finds invalid) must not cost the rest of the reconcile: the other pods, the gateway, the
Job and above all the status write still happen, and the refusal goes into that status
(`Degraded`) or a retry (refusals.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from cascade_operator.clients.kube import Body, Cluster, KubeRefusal
from cascade_operator.observed import MdRef
from cascade_operator.reconcile import Actions
from cascade_operator.refusals import Refusal

log = logging.getLogger(__name__)


class Acts:
    """One reconcile's calls on the cluster; `refused` holds what the server said no to."""

    def __init__(self, cluster: Cluster, ref: MdRef) -> None:
        self.cluster, self.ref = cluster, ref
        self.refused: list[Refusal] = []

    def call(self, action: str, write: Callable[..., object], *args: object) -> None:
        try:
            write(*args)
        except KubeRefusal as err:
            log.warning("%s: %s refused: %s %s", self.ref, action, err.status, err.message)
            self.refused.append(Refusal(action, err.status, err.message))

    def run(self, actions: Actions) -> None:
        """Make the calls in the order `reconcile.decide` lists them: lost pods first
        (their replacements take their names), then the Job, the pods, the objects."""
        ns, force = self.ref.namespace, partial(self.cluster.delete_pod, force=True)
        for pod in actions.force_delete:
            self.call(f"force-delete pod {pod}", force, ns, pod)
        for manifest in actions.create_jobs:
            self.call(f"create job {_name(manifest)}", self.cluster.create_job, manifest)
        for job in actions.delete_jobs:
            self.call(f"delete job {job}", self.cluster.delete_job, ns, job)
        for manifest in actions.create_pods:
            self.call(f"create pod {_name(manifest)}", self.cluster.create_pod, manifest)
        for pod in actions.delete_pods:
            self.call(f"delete pod {pod}", self.cluster.delete_pod, ns, pod)
        for manifest in actions.apply:
            what = f"apply {manifest['kind']} {_name(manifest)}"
            self.call(what, self.cluster.apply, manifest)


def _name(manifest: Body) -> str:
    return str(manifest["metadata"]["name"])
