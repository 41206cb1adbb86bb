"""A reconcile's writes: each decision's calls made, each refusal kept instead of raised.

One refused create (a conflict, a throttled or failing API server, an object the server
finds invalid) must not cost the rest of the reconcile: the other pods, the gateway, the
Job and above all the status write still happen, and the refusal goes into that status
(`Degraded`) or a retry (refusals.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator.clients.kube import Body, Cluster, KubeRefusal
from cascade_operator.config import OperatorConfig
from cascade_operator.materialization import (
    JobView,
    MaterializationDecision,
    decide_materialization,
    job_selector,
)
from cascade_operator.network_policies import changed, network_policies, policy_selector
from cascade_operator.observed import MdRef
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

    def pods(self, create: Iterable[Body], delete: Iterable[str]) -> None:
        for manifest in create:
            self.call(
                f"create pod {manifest['metadata']['name']}", self.cluster.create_pod, manifest
            )
        for pod in delete:
            self.call(f"delete pod {pod}", self.cluster.delete_pod, self.ref.namespace, pod)

    def apply(self, manifests: Iterable[Body]) -> None:
        for manifest in manifests:
            what = f"apply {manifest['kind']} {manifest['metadata']['name']}"
            self.call(what, self.cluster.apply, manifest)

    def profile_job(
        self, spec: ModelDeploymentSpec | None, cfg: OperatorConfig
    ) -> MaterializationDecision:
        """Keep the profile Job of the current spec (none while the spec is invalid)."""
        if spec is None:
            return MaterializationDecision()
        bodies = self.cluster.list_jobs(self.ref.namespace, job_selector(self.ref.name))
        decision = decide_materialization(self.ref, spec, [JobView.of(b) for b in bodies], cfg)
        for manifest in decision.create:
            what = f"create job {manifest['metadata']['name']}"
            self.call(what, self.cluster.create_job, manifest)
        for name in decision.delete:
            self.call(f"delete job {name}", self.cluster.delete_job, self.ref.namespace, name)
        return decision

    def network_policies(self, cfg: OperatorConfig) -> None:
        """Keep the deployment's NetworkPolicies as built, whatever its spec (pods of an
        earlier spec still run): create the missing, patch back the changed."""
        ref = self.ref
        found = self.cluster.list_network_policies(ref.namespace, policy_selector(ref.name))
        self.apply(changed(network_policies(ref, cfg), found))
