"""Operator settings read once from the environment (the Helm chart sets them)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from cascade_api import constants as c

# The Cascade autoscaler's tick: how soon demand (a request held at zero) is acted on.
# Read at import, since kopf fixes a timer's interval when the handler is registered.
AUTOSCALE_SECONDS = float(os.environ.get("CASCADE_AUTOSCALE_SECONDS", "2"))

# How often the status of pods whose worker has not answered yet is probed (only while
# such pods exist): a plan should start within a second of a target answering, and the
# 1 s poll plus a reconcile alone could take longer (handlers.poll_starting).
STARTING_POLL_S = float(os.environ.get("CASCADE_STARTING_POLL_SECONDS", "0.2"))

# The chart's defaults (release "cascade" in cascade-system): used when the operator runs
# outside the chart (the dev cluster runs it as a host process, which no policy names).
DEFAULT_OPERATOR_NAMESPACE = "cascade-system"
DEFAULT_OPERATOR_LABELS = (
    ("app.kubernetes.io/name", "cascade"),
    ("app.kubernetes.io/component", "operator"),
)
# Where `file://` models may live on the nodes: the dev cluster's model directory.
DEFAULT_MODEL_ROOTS = ("/var/lib/cascade/models",)


@dataclass(frozen=True)
class OperatorConfig:
    worker_image: str = c.WORKER_IMAGE
    gateway_image: str = c.GATEWAY_IMAGE
    # Resync period: a safety net; reconciling is driven by watch events.
    resync_seconds: float = 30.0
    # The RDMA device plugin's extended resource a GPU worker requests (chart value
    # rdma.resourceName, e.g. rdma/rdma_shared_device_a); empty: the cluster has no RDMA
    # plugin and workers move weights over TCP.
    rdma_resource: str = ""
    rdma_count: int = 1
    # Who the operator is, so the NetworkPolicies it builds let it reach the workers'
    # control API: its namespace and its pods' labels (the chart's selector labels), as
    # sorted pairs so the config stays hashable.
    operator_namespace: str = DEFAULT_OPERATOR_NAMESPACE
    operator_pod_labels: tuple[tuple[str, str], ...] = DEFAULT_OPERATOR_LABELS
    # The flow model's per-hop start cost before any plan completes (chart value
    # planner.hopLatencySeconds; `cascade bench scaleup` prints it for a fabric), and
    # whether Completed plans refine it (weights/calibration.py).
    hop_latency_s: float = 0.0  # per chain hop
    step_latency_s: float | None = None  # per binomial step (None: hop_latency_s)
    learn_hop_latency: bool = True
    # The node directories a `file://` model may name (chart value models.fileRoots,
    # env CASCADE_MODEL_ROOTS, comma-separated absolute paths): a worker mounts nothing
    # else of the node's. Empty: unchecked (a config built in code; from_env never is).
    model_roots: tuple[str, ...] = ()
    # What every pod the operator makes needs of the cluster (pod_options.py): the chart's
    # imagePullSecrets, the worker pods' runtimeClassName and annotations, and the data
    # plane's UCX transports and interfaces (empty: the worker's TCP default).
    image_pull_secrets: tuple[str, ...] = ()
    worker_runtime_class: str = ""
    worker_annotations: tuple[tuple[str, str], ...] = ()
    ucx_tls: str = ""
    ucx_net_devices: str = ""

    @classmethod
    def from_env(cls) -> OperatorConfig:
        return cls(
            worker_image=os.environ.get("CASCADE_WORKER_IMAGE", c.WORKER_IMAGE),
            gateway_image=os.environ.get("CASCADE_GATEWAY_IMAGE", c.GATEWAY_IMAGE),
            resync_seconds=float(os.environ.get("CASCADE_RESYNC_SECONDS", "30")),
            rdma_resource=os.environ.get("CASCADE_RDMA_RESOURCE", "").strip(),
            rdma_count=int(os.environ.get("CASCADE_RDMA_COUNT") or 1),
            operator_namespace=os.environ.get("CASCADE_OPERATOR_NAMESPACE")
            or DEFAULT_OPERATOR_NAMESPACE,
            operator_pod_labels=parse_labels(os.environ.get("CASCADE_OPERATOR_POD_LABELS", ""))
            or DEFAULT_OPERATOR_LABELS,
            hop_latency_s=float(os.environ.get("CASCADE_HOP_LATENCY_S") or 0.0),
            step_latency_s=_seconds(os.environ.get("CASCADE_STEP_LATENCY_S", "")),
            learn_hop_latency=os.environ.get("CASCADE_HOP_LEARN", "1").lower()
            not in ("0", "false", "no"),
            model_roots=parse_roots(os.environ.get("CASCADE_MODEL_ROOTS", ""))
            or DEFAULT_MODEL_ROOTS,
            image_pull_secrets=tuple(
                n.strip()
                for n in os.environ.get("CASCADE_IMAGE_PULL_SECRETS", "").split(",")
                if n.strip()
            ),
            worker_runtime_class=os.environ.get("CASCADE_WORKER_RUNTIME_CLASS", "").strip(),
            worker_annotations=parse_labels(os.environ.get("CASCADE_WORKER_ANNOTATIONS", "")),
            ucx_tls=os.environ.get("CASCADE_UCX_TLS", "").strip(),
            ucx_net_devices=os.environ.get("CASCADE_UCX_NET_DEVICES", "").strip(),
        )

    @property
    def rdma(self) -> bool:
        """An RDMA resource is configured (and its count is positive)."""
        return bool(self.rdma_resource) and self.rdma_count > 0


def _seconds(text: str) -> float | None:
    return float(text) if text.strip() else None


def parse_labels(text: str) -> tuple[tuple[str, str], ...]:
    """`k=v,k2=v2` (a label selector of equality terms) as sorted pairs; blanks skipped."""
    pairs = (term.split("=", 1) for term in text.split(",") if "=" in term)
    return tuple(sorted((k.strip(), v.strip()) for k, v in pairs if k.strip()))


def parse_roots(text: str) -> tuple[str, ...]:
    """Comma-separated absolute directories; a relative one is an error naming it."""
    roots = tuple(r.strip().rstrip("/") or "/" for r in text.split(",") if r.strip())
    relative = [r for r in roots if not r.startswith("/")]
    if relative:
        raise ValueError(f"CASCADE_MODEL_ROOTS: {relative[0]!r} is not an absolute path")
    return roots
