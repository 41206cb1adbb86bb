"""Shared builders for the operator's unit tests: one deployment ("llama" in "models"),
its pods as observed, its workers as the weight-moving half sees them, and in-memory
stand-ins for the API server and the workers' control APIs (`FakeCluster`,
`FakeWorkers`) that the controller runs against without a cluster."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from cascade_api import constants as c
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaleplan import Block
from cascade_operator.clients.kube_errors import KubeRefusal
from cascade_operator.clients.workers import Delivery
from cascade_operator.config import OperatorConfig
from cascade_operator.events import EventNote
from cascade_operator.observed import GatewayView, MdRef, Observed, PodView
from cascade_operator.weights.workers import WorkerView
from cascade_protocol.control import ManifestInfo
from cascade_protocol.status import WorkerStatus

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
REF = MdRef(name="llama", namespace="models", uid="uid-1")
CFG = OperatorConfig()
GW_UP = GatewayView(deployment_exists=True, service_exists=True, available_replicas=1)
MODEL_URI = "file:///models/tiny"
B = 8  # blocks of the test model, digest "m1"
BLOCKS = [
    Block(index=i, layer_start=i, layer_end=i + 1, bytes=1 << 20, checksum="x") for i in range(B)
]
Body = dict[str, Any]


def md_body(replicas: int, **spec: Any) -> Body:
    """The ModelDeployment object as the API server holds it (generation 1)."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.MD_KIND,
        "metadata": {"name": REF.name, "namespace": REF.namespace, "generation": 1},
        "spec": {"model": {"uri": MODEL_URI}, "replicas": replicas, **spec},
    }


def md(**spec: Any) -> ModelDeploymentSpec:
    return ModelDeploymentSpec.model_validate({"model": {"uri": MODEL_URI}, **spec})


def _ordinal(name: str) -> int:
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 1


def pod(index: int, **kw: Any) -> PodView:
    """llama-<index>: running, ready, placed on n0, with an IP."""
    fields: dict[str, Any] = {
        "node": "n0",
        "phase": "Running",
        "ready": True,
        "terminating": False,
        "ip": f"10.0.0.{index}",
    }
    return PodView(name=f"llama-{index}", index=index, **(fields | kw))


def observe(pods: Sequence[PodView] = (), **kw: Any) -> Observed:
    fields: dict[str, Any] = {
        "ref": REF,
        "generation": 2,
        "status": {"observedGeneration": 2},
        "pods": list(pods),
        "gateway": GW_UP,
    }
    return Observed(**(fields | kw))


def raw_pod(
    name: str, *, start: str = "await", created: datetime = NOW, ip: str | None = None
) -> Body:
    """A worker pod as the API server returns it (Running once it has an IP)."""
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "annotations": {f"{c.GROUP}/start": start},
            "creationTimestamp": created.isoformat(),
        },
        "spec": {"nodeName": "n0"},
        "status": {"phase": "Running" if ip else "Pending", "podIP": ip},
    }


def worker(name: str, **kw: Any) -> WorkerView:
    """An idle, reachable worker on node n<i> (i: the name's ordinal) holding nothing."""
    i = _ordinal(name)
    fields: dict[str, Any] = {
        "node": f"n{i}",
        "ip": f"10.0.0.{i}",
        "created": NOW - timedelta(hours=1),
        "alive": True,
        "phase": "idle",
    }
    return WorkerView(name=name, **(fields | kw))


def holder(name: str, **kw: Any) -> WorkerView:
    """A worker that holds all B blocks of model m1 and serves them."""
    fields: dict[str, Any] = {
        "phase": "ready",
        "engine": "serving",
        "model_digest": "m1",
        "blocks_loaded": B,
        "blocks_total": B,
    }
    return worker(name, **(fields | kw))


def merge_patch(target: Body, patch: Body) -> Body:
    """A JSON merge patch (RFC 7386), as the API server applies one: objects merge
    key by key, a null removes, anything else replaces."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_patch(out[key], value)
        else:
            out[key] = value
    return out


class NoInferencePools:
    """A cluster without the Gateway API Inference Extension (clients.kube_pools)."""

    def served(self) -> bool:
        return False


class FakeCluster:
    """The API server as the controller uses it (clients.kube.Cluster's methods), in
    memory: objects by (kind, namespace, name); a status patch is a JSON merge patch."""

    def __init__(self, nodes: int = 4) -> None:
        self.forced: list[str] = []  # pods deleted with grace 0
        self.objects: dict[tuple[str, str, str], Body] = {}
        self.nodes = [{"metadata": {"name": f"n{i}", "labels": {}}} for i in range(nodes)]
        self.events: list[EventNote] = []
        self.status_writes = 0
        self.scale_writes: list[int] = []
        self._uids = itertools.count(1)
        self.pools = NoInferencePools()
        self._refusals: dict[str, list[KubeRefusal]] = {}

    def refuse_next(self, method: str, status: int, message: str) -> None:
        """The next call of `method` is refused as the API server would (then it works)."""
        self._refusals.setdefault(method, []).append(KubeRefusal(status, message))

    def _refuse(self, method: str) -> None:
        if self._refusals.get(method):
            raise self._refusals[method].pop(0)

    def add(self, kind: str, body: Body) -> Body:
        meta = body.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta.setdefault("creationTimestamp", NOW.isoformat())
        self.objects[(kind, meta.get("namespace", REF.namespace), meta["name"])] = body
        return body

    def _list(self, kind: str, namespace: str, selector: str) -> list[Body]:
        want = dict(term.split("=", 1) for term in selector.split(",") if term)
        return [
            b
            for (k, ns, _), b in sorted(self.objects.items())
            if k == kind
            and ns == namespace
            and want.items() <= (b["metadata"].get("labels") or {}).items()
        ]

    def get_md(self, namespace: str, name: str) -> Body | None:
        return self.objects.get((c.MD_KIND, namespace, name))

    def list_pods(self, namespace: str, selector: str) -> list[Body]:
        return self._list("Pod", namespace, selector)

    def get_gateway(self, namespace: str, name: str) -> tuple[Body | None, Body | None]:
        get = self.objects.get
        return get(("Deployment", namespace, name)), get(("Service", namespace, name))

    def ensure_secret(self, manifest: Body) -> Body:
        key = ("Secret", manifest["metadata"]["namespace"], manifest["metadata"]["name"])
        if key not in self.objects:
            self.add("Secret", manifest)
        return self.objects[key]

    def create_pod(self, manifest: Body) -> None:
        self._refuse("create_pod")
        key = ("Pod", manifest["metadata"]["namespace"], manifest["metadata"]["name"])
        if key not in self.objects:
            self.add("Pod", {**manifest, "status": {"phase": "Pending"}})

    def delete_pod(self, namespace: str, name: str, *, force: bool = False) -> None:
        self.objects.pop(("Pod", namespace, name), None)
        self.forced += [name] if force else []

    def list_jobs(self, namespace: str, selector: str) -> list[Body]:
        return self._list("Job", namespace, selector)

    def create_job(self, manifest: Body) -> None:
        key = ("Job", manifest["metadata"]["namespace"], manifest["metadata"]["name"])
        if key not in self.objects:
            self.add("Job", {**manifest, "status": {}})

    def delete_job(self, namespace: str, name: str) -> None:
        self.objects.pop(("Job", namespace, name), None)

    def list_network_policies(self, namespace: str, selector: str) -> list[Body]:
        return self._list("NetworkPolicy", namespace, selector)

    def apply(self, manifest: Body) -> None:
        self._refuse("apply")
        self.add(manifest["kind"], manifest)

    def patch_md_status(self, namespace: str, name: str, status: Body) -> None:
        self._refuse("patch_md_status")
        body = self.objects[(c.MD_KIND, namespace, name)]
        body["status"] = merge_patch(body.get("status") or {}, status)
        self.status_writes += 1

    def list_nodes(self) -> list[Body]:
        return self.nodes

    def label_pod(self, namespace: str, name: str, key: str, value: str) -> None:
        pod = self.objects.get(("Pod", namespace, name))
        if pod is not None:
            pod["metadata"].setdefault("labels", {})[key] = value

    def scale_md(self, namespace: str, name: str, replicas: int) -> None:
        body = self.objects[(c.MD_KIND, namespace, name)]
        body["spec"]["replicas"] = replicas
        body["metadata"]["generation"] = int(body["metadata"].get("generation", 0)) + 1
        self.scale_writes.append(replicas)

    def annotate_pod(self, namespace: str, name: str, key: str, value: str | None) -> None:
        pod = self.objects.get(("Pod", namespace, name))
        if pod is not None:
            notes = pod["metadata"].setdefault("annotations", {})
            notes.pop(key, None) if value is None else notes.update({key: value})

    def list_scaleplans(self, namespace: str, selector: str) -> list[Body]:
        return self._list(c.SP_KIND, namespace, selector)

    def create_scaleplan(self, manifest: Body) -> bool:
        meta = manifest["metadata"]
        if (c.SP_KIND, meta["namespace"], meta["name"]) in self.objects:
            return False
        self.add(c.SP_KIND, manifest)
        return True

    def patch_scaleplan_status(self, namespace: str, name: str, status: Body) -> None:
        plan = self.objects.get((c.SP_KIND, namespace, name))
        if plan is not None:
            plan["status"] = {**(plan.get("status") or {}), **status}

    def delete_scaleplan(self, namespace: str, name: str) -> None:
        self.objects.pop((c.SP_KIND, namespace, name), None)

    def emit_event(self, owner: Body, note: EventNote) -> None:
        self.events.append(note)

    def delete_owned(self, namespace: str, md: str) -> int:
        owned = [k for k, b in self.objects.items() if k[0] != c.MD_KIND and k[1] == namespace]
        for key in owned:
            del self.objects[key]
        return 0


class FakeWorkers:
    """Workers' control APIs (clients.workers.WorkerClient's methods): statuses by pod
    IP, one holder's manifest, and every order sent."""

    def __init__(self) -> None:
        self.by_ip: dict[str, WorkerStatus] = {}
        self.sent: list[Any] = []
        self.tokens: dict[str, str] = {}  # pod IP -> the token its requests carry

    def authorize(self, ips: Sequence[str | None], token: str) -> None:
        self.tokens |= {ip: token for ip in ips if ip}

    def statuses(self, ips: Sequence[str | None]) -> list[WorkerStatus | None]:
        return [self.by_ip.get(ip) if ip else None for ip in ips]

    def answering(self, ips: Sequence[str], timeout_s: float = 0.25) -> bool:
        return any(ip in self.by_ip for ip in ips)

    def manifest(self, ip: str) -> ManifestInfo | None:
        held = self.by_ip.get(ip)
        if held is None or held.model_digest is None:
            return None
        return ManifestInfo(
            pod=held.pod, data_port=0, model_digest=held.model_digest, blocks=BLOCKS
        )

    def send(self, order: Any) -> Delivery:
        self.sent.append(order)
        return Delivery(order.pod, True, 202)

    def send_all(self, orders: Sequence[Any]) -> list[Delivery]:
        return [self.send(o) for o in orders]
