"""Node registration and heartbeats: what keeps the simulated nodes Ready.

Registration creates each Node (or re-asserts our labels on an existing one) and posts
its status. Afterwards one thread renews every node's Lease each 10 s and re-posts node
status each 40 s; the node lifecycle controller only marks a node NotReady when both go
quiet for its grace period, which happens exactly when this agent is gone.

Fault injection: nodes named in the file `silence` (one per line; `cascade_dev.testing`
writes it) get no heartbeat while listed, as if their kubelet were gone; their pods
keep running, as a partitioned node's do.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cascade_dev.fabric import Fabric

from .kube import MERGE, TRANSIENT, Kube
from .nodes import (
    LEASE_NAMESPACE,
    NodeSpec,
    lease_manifest,
    node_manifest,
    node_metadata_patch,
    node_status,
)
from .timeutil import now

log = logging.getLogger(__name__)

LEASE_PERIOD_S = 10.0
STATUS_EVERY = 4  # lease periods between node status posts (40 s)


class Heartbeat:
    def __init__(
        self,
        kube: Kube,
        nodes: Sequence[NodeSpec],
        fabric: Fabric,
        stop: threading.Event,
        silence: Path | None = None,
    ) -> None:
        self._kube, self._nodes, self._fabric, self._stop = kube, list(nodes), fabric, stop
        self._silence = silence
        self._uids: dict[str, str] = {}
        self._conditions: dict[str, list[dict[str, Any]]] = {}
        self._kernel = os.uname().release

    def register_all(self) -> None:
        """Register every node, retrying until the API answers (or we are stopped)."""
        delay = 0.5
        pending = list(self._nodes)
        while pending and not self._stop.is_set():
            try:
                while pending:
                    self.register(pending[0])
                    pending.pop(0)
            except TRANSIENT as e:
                log.warning("node registration failed (%s); retrying in %.1fs", e, delay)
                self._stop.wait(delay)
                delay = min(delay * 2, 10.0)

    def register(self, spec: NodeSpec) -> None:
        path = f"/api/v1/nodes/{spec.name}"
        ip = self._fabric.node_ip(spec.name)
        node = self._kube.get(path)
        if node is None:
            node = self._kube.request(
                "POST", "/api/v1/nodes", body=node_manifest(spec, ip, now(), self._kernel)
            )
            log.info("registered node %s (%s)", spec.name, ip)
        else:
            node = self._kube.request(
                "PATCH", path, body=node_metadata_patch(spec), content_type=MERGE
            )
            self._conditions[spec.name] = list((node.get("status") or {}).get("conditions") or [])
            log.info("node %s exists; labels re-applied", spec.name)
        self._uids[spec.name] = str(node["metadata"]["uid"])
        self.post_status(spec)
        self.renew_lease(spec)

    def post_status(self, spec: NodeSpec) -> None:
        status = node_status(
            spec,
            self._fabric.node_ip(spec.name),
            now(),
            self._conditions.get(spec.name, []),
            self._kernel,
        )
        self._kube.request(
            "PATCH",
            f"/api/v1/nodes/{spec.name}/status",
            body={"status": status},
            content_type=MERGE,
        )
        self._conditions[spec.name] = status["conditions"]

    def renew_lease(self, spec: NodeSpec) -> None:
        lease = lease_manifest(spec.name, self._uids.get(spec.name), now())
        base = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
        if self._kube.get(f"{base}/{spec.name}") is None:
            self._kube.request("POST", base, body=lease)
        else:
            self._kube.request(
                "PATCH", f"{base}/{spec.name}", body={"spec": lease["spec"]}, content_type=MERGE
            )

    def silenced(self) -> set[str]:
        """Nodes whose heartbeat is held back (fault injection)."""
        if self._silence is None or not self._silence.is_file():
            return set()
        return {line.strip() for line in self._silence.read_text().splitlines() if line.strip()}

    def run(self) -> None:
        """Heartbeat loop (own thread) until stopped."""
        tick = 0
        while not self._stop.wait(LEASE_PERIOD_S):
            tick += 1
            self.beat(tick)

    def beat(self, tick: int) -> None:
        """One lease period: renew every node's lease (and its status every
        STATUS_EVERY ticks), except the silenced ones."""
        silent = self.silenced()
        for spec in self._nodes:
            if spec.name in silent:
                continue
            try:
                if self._kube.get(f"/api/v1/nodes/{spec.name}") is None:
                    log.warning("node %s disappeared; registering it again", spec.name)
                    self.register(spec)
                    continue
                self.renew_lease(spec)
                if tick % STATUS_EVERY == 0:
                    self.post_status(spec)
            except TRANSIENT as e:
                log.warning("heartbeat for %s failed: %s", spec.name, e)
            except Exception:  # keep beating for the other nodes, and next time
                log.exception("heartbeat for %s failed", spec.name)
