"""The kube client's InferencePool half (`Cluster.pools`): is the CRD served, what the
API holds, and the writes `inference_pool.keep_pool` decides.

Whether `inference.networking.k8s.io/v1` serves `inferencepools` is asked through
discovery (no RBAC needed) at most once a minute, so installing or removing the Gateway
API Inference Extension is noticed without a restart. The pool is an optional hook: a
refusal to write it (no RBAC for it, a CRD whose schema refuses it) is logged once per
deployment and never fails the reconcile that keeps the deployment serving.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from cascade_operator.clients.kube_errors import refusals_as_kube_refusal, success_on
from cascade_operator.inference_pool import (
    GROUP,
    LABEL_SERVING,
    PLURAL,
    VERSION,
    PoolPlan,
    PoolSeen,
    serving_selector,
)
from cascade_operator.observed import MdRef

log = logging.getLogger(__name__)
Body = dict[str, Any]
RECHECK_S = 60.0
# Refusals of the pool write that the API keeps giving: no grant, a schema that refuses it.
LASTING = (403, 422)


class InferencePools:
    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self._served = False
        self._checked = -RECHECK_S
        self._warned: set[tuple[str, str]] = set()
        self._guard = threading.Lock()

    @refusals_as_kube_refusal
    def served(self) -> bool:
        """The CRD is installed and serves v1 (cached for RECHECK_S)."""
        with self._guard:
            if time.monotonic() - self._checked < RECHECK_S:
                return self._served
            found = False
            with success_on(404):  # the group/version is not served at all
                resources = self.custom.get_api_resources(GROUP, VERSION)
                found = any(r.name == PLURAL for r in resources.resources or [])
            if found != self._served:
                log.info("InferencePool API %s", "served: keeping pools" if found else "gone")
            self._served, self._checked = found, time.monotonic()
            return found

    @refusals_as_kube_refusal
    def observe(self, ref: MdRef) -> PoolSeen:
        """The pods that carry the serving label and the deployment's pool (or None)."""
        pods = self.core.list_namespaced_pod(
            ref.namespace, label_selector=serving_selector(ref.name)
        )
        labelled = frozenset(p.metadata.name for p in pods.items)
        pool: Body | None = None
        with success_on(404, 403):  # none yet; or no grant to read it (act says so)
            pool = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, ref.namespace, PLURAL, ref.name
            )
        return PoolSeen(labelled, pool)

    @refusals_as_kube_refusal
    def act(self, plan: PoolPlan) -> None:
        """Set or remove each pod's serving label, then create the pool or put its spec
        back (a JSON patch replaces it whole: a merge would keep added matchLabels)."""
        for pod, value in plan.labels.items():
            with success_on(404):  # gone already
                patch = {"metadata": {"labels": {LABEL_SERVING: value}}}
                self.core.patch_namespaced_pod(pod, plan.namespace, patch)
        if plan.pool is None:
            return
        name = plan.pool["metadata"]["name"]
        try:
            try:
                self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, plan.namespace, PLURAL, plan.pool
                )
                log.info("%s/%s: InferencePool created", plan.namespace, name)
            except ApiException as err:
                if err.status != 409:
                    raise
                replace = [{"op": "replace", "path": "/spec", "value": plan.pool["spec"]}]
                self.custom.patch_namespaced_custom_object(
                    GROUP, VERSION, plan.namespace, PLURAL, name, replace,
                    _content_type="application/json-patch+json",
                )  # fmt: skip
                log.info("%s/%s: InferencePool spec put back", plan.namespace, name)
        except ApiException as err:
            if err.status not in LASTING:
                raise
            if (plan.namespace, name) not in self._warned:
                self._warned.add((plan.namespace, name))
                log.warning("%s/%s: InferencePool refused: %s", plan.namespace, name, err.reason)
