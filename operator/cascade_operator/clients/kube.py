"""The only module that talks to the Kubernetes API server.

Every call is idempotent from the caller's point of view: creating something that
exists and deleting something already gone are successes, because a reconcile may be
repeated at any time (operator restarts, overlapping watch events). A refusal the
caller must handle leaves as `KubeRefusal` (the API server's own message inside), so no
other module imports the kubernetes client.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from cascade_api import constants as c
from cascade_api.base import utcnow
from cascade_operator.clients.kube_errors import (
    KubeRefusal,
    missing,
    refusals_as_kube_refusal,
    success_on,
)
from cascade_operator.clients.kube_pools import InferencePools
from cascade_operator.events import EventNote
from cascade_protocol.peer_auth import secret_name

log = logging.getLogger(__name__)
Body = dict[str, Any]
__all__ = ["Body", "Cluster", "KubeRefusal", "load_config"]


def load_config() -> None:
    """In-cluster service account when running as a pod, else $KUBECONFIG / ~/.kube/config."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()


class Cluster:
    def __init__(self) -> None:
        api = client.ApiClient()
        self._api = api
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.networking = client.NetworkingV1Api(api)
        self.pools = InferencePools(api)  # the Inference Extension's pools, where served

    def _dict(self, obj: Any) -> Body:
        result: Body = self._api.sanitize_for_serialization(obj)
        return result

    @refusals_as_kube_refusal
    def get_md(self, namespace: str, name: str) -> Body | None:
        with success_on(404):
            body: Body = self.custom.get_namespaced_custom_object(
                c.GROUP, c.VERSION, namespace, c.MD_PLURAL, name
            )
            return body
        return None

    @refusals_as_kube_refusal
    def list_pods(self, namespace: str, selector: str) -> list[Body]:
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector)
        return [self._dict(p) for p in pods.items]

    @refusals_as_kube_refusal
    def get_gateway(self, namespace: str, name: str) -> tuple[Body | None, Body | None]:
        found: list[Body | None] = []
        for read in (self.apps.read_namespaced_deployment, self.core.read_namespaced_service):
            try:
                found.append(self._dict(read(name, namespace)))
            except ApiException as err:
                if not missing(err):
                    raise
                found.append(None)
        return found[0], found[1]

    @refusals_as_kube_refusal
    def ensure_secret(self, manifest: Body) -> Body:
        """The Secret named in `manifest` as stored: created from it when missing, left
        as it is when it exists (a peer token must not change under running pods)."""
        meta = manifest["metadata"]
        try:
            return self._dict(self.core.read_namespaced_secret(meta["name"], meta["namespace"]))
        except ApiException as err:
            if not missing(err):
                raise
        with success_on(409):  # another reconcile made it first: read that one
            return self._dict(self.core.create_namespaced_secret(meta["namespace"], manifest))
        return self._dict(self.core.read_namespaced_secret(meta["name"], meta["namespace"]))

    @refusals_as_kube_refusal
    def create_pod(self, manifest: Body) -> None:
        with success_on(409):
            self.core.create_namespaced_pod(manifest["metadata"]["namespace"], manifest)

    @refusals_as_kube_refusal
    def delete_pod(self, namespace: str, name: str, *, force: bool = False) -> None:
        """Delete a pod; `force`: at once (grace 0), for a pod whose kubelet is gone."""
        with success_on(404):
            self.core.delete_namespaced_pod(
                name, namespace, grace_period_seconds=0 if force else None
            )

    @refusals_as_kube_refusal
    def list_jobs(self, namespace: str, selector: str) -> list[Body]:
        jobs = self.batch.list_namespaced_job(namespace, label_selector=selector)
        return [self._dict(j) for j in jobs.items]

    @refusals_as_kube_refusal
    def create_job(self, manifest: Body) -> None:
        with success_on(409):
            self.batch.create_namespaced_job(manifest["metadata"]["namespace"], manifest)

    @refusals_as_kube_refusal
    def delete_job(self, namespace: str, name: str) -> None:
        with success_on(404):  # Background: a Job's default propagation orphans its pods
            self.batch.delete_namespaced_job(
                name, namespace, propagation_policy="Background", _preload_content=False
            )

    @refusals_as_kube_refusal
    def list_network_policies(self, namespace: str, selector: str) -> list[Body]:
        found = self.networking.list_namespaced_network_policy(namespace, label_selector=selector)
        return [self._dict(p) for p in found.items]

    @refusals_as_kube_refusal
    def apply(self, manifest: Body) -> None:
        """Create a gateway object (Deployment, Service, its ServiceAccount and RBAC) or a
        NetworkPolicy, or merge-patch it to the manifest."""
        kind, meta = manifest["kind"], manifest["metadata"]
        api, noun = {  # each API's create_namespaced_<noun> and patch_namespaced_<noun>
            "Deployment": (self.apps, "deployment"),
            "Service": (self.core, "service"),
            "ServiceAccount": (self.core, "service_account"),
            "Role": (self.rbac, "role"),
            "RoleBinding": (self.rbac, "role_binding"),
            "NetworkPolicy": (self.networking, "network_policy"),
        }[kind]
        create: Any = getattr(api, f"create_namespaced_{noun}")
        patch: Any = getattr(api, f"patch_namespaced_{noun}")
        try:
            create(meta["namespace"], manifest)
        except ApiException as err:
            if err.status != 409:
                raise
            patch(meta["name"], meta["namespace"], manifest)

    @refusals_as_kube_refusal
    def patch_md_status(self, namespace: str, name: str, status: Body) -> None:
        self.custom.patch_namespaced_custom_object_status(
            c.GROUP, c.VERSION, namespace, c.MD_PLURAL, name, {"status": status}
        )

    @refusals_as_kube_refusal
    def list_nodes(self) -> list[Body]:
        return [self._dict(n) for n in self.core.list_node().items]

    @refusals_as_kube_refusal
    def annotate_pod(self, namespace: str, name: str, key: str, value: str | None) -> None:
        """Set (or with None remove) one annotation; a pod already gone is a success."""
        patch = {"metadata": {"annotations": {key: value}}}
        with success_on(404):
            self.core.patch_namespaced_pod(name, namespace, patch)

    @refusals_as_kube_refusal
    def label_pod(self, namespace: str, name: str, key: str, value: str) -> None:
        """Set one label; a pod already gone is a success."""
        with success_on(404):
            self.core.patch_namespaced_pod(name, namespace, {"metadata": {"labels": {key: value}}})

    @refusals_as_kube_refusal
    def scale_md(self, namespace: str, name: str, replicas: int) -> None:
        """Write spec.replicas through the /scale subresource, as an HPA does."""
        self.custom.patch_namespaced_custom_object_scale(
            c.GROUP, c.VERSION, namespace, c.MD_PLURAL, name, {"spec": {"replicas": replicas}}
        )

    @refusals_as_kube_refusal
    def list_scaleplans(self, namespace: str, selector: str) -> list[Body]:
        found = self.custom.list_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, c.SP_PLURAL, label_selector=selector
        )
        items: list[Body] = found.get("items") or []
        return items

    @refusals_as_kube_refusal
    def create_scaleplan(self, manifest: Body) -> bool:
        """Create a ScalePlan; False when it already exists (a re-derived name: success)."""
        try:
            self.custom.create_namespaced_custom_object(
                c.GROUP, c.VERSION, manifest["metadata"]["namespace"], c.SP_PLURAL, manifest
            )
        except ApiException as err:
            if err.status != 409:
                raise
            return False
        return True

    @refusals_as_kube_refusal
    def patch_scaleplan_status(self, namespace: str, name: str, status: Body) -> None:
        with success_on(404):
            self.custom.patch_namespaced_custom_object_status(
                c.GROUP, c.VERSION, namespace, c.SP_PLURAL, name, {"status": status}
            )

    @refusals_as_kube_refusal
    def delete_scaleplan(self, namespace: str, name: str) -> None:
        with success_on(404):
            self.custom.delete_namespaced_custom_object(
                c.GROUP, c.VERSION, namespace, c.SP_PLURAL, name
            )

    @refusals_as_kube_refusal
    def emit_event(self, owner: Body, note: EventNote) -> None:
        meta = owner["metadata"]
        stamp = utcnow().isoformat().replace("+00:00", "Z")
        event = {
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:12]}"},
            "involvedObject": {
                "apiVersion": owner.get("apiVersion", c.API_VERSION),
                "kind": owner.get("kind", c.MD_KIND),
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
            "type": note.type,
            "reason": note.reason,
            "message": note.message,
            "source": {"component": c.MANAGED_BY},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.core.create_namespaced_event(meta["namespace"], event)
        except ApiException as err:  # an event is best effort; never fail a reconcile on it
            log.warning("could not post event %s: %s", note.reason, err.reason)

    @refusals_as_kube_refusal
    def delete_owned(self, namespace: str, md: str) -> int:
        """Delete every Job, pod, gateway object, ScalePlan and the peer-token Secret of `md`;
        returns pods left."""
        selector = f"{c.LABEL_DEPLOYMENT}={md}"
        for job in self.list_jobs(namespace, selector):  # first: a Job would make new pods
            self.delete_job(namespace, job["metadata"]["name"])
        pods = self.list_pods(namespace, selector)
        for pod in pods:
            self.delete_pod(namespace, pod["metadata"]["name"])
        gateway = f"{md}-gateway"
        for delete in (
            self.apps.delete_namespaced_deployment,
            self.core.delete_namespaced_service,
            self.rbac.delete_namespaced_role_binding,
            self.rbac.delete_namespaced_role,
            self.core.delete_namespaced_service_account,
        ):
            with success_on(404):
                # No body decoding: a Service delete answers a Status object that this
                # client version fails to parse as a V1Service.
                delete(gateway, namespace, _preload_content=False)
        self.custom.delete_collection_namespaced_custom_object(
            c.GROUP, c.VERSION, namespace, c.SP_PLURAL, label_selector=selector
        )
        with success_on(404):  # the peer token: the pods that held it are going
            self.core.delete_namespaced_secret(secret_name(md), namespace, _preload_content=False)
        return len(pods)
