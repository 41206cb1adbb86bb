"""The node agent's NetworkPolicy enforcement: every local pod's nftables table kept
equal to what the API server's policies say (cascade_dev.netpolicy decides).

Once a second, and at once when a pod of this agent gets its address, it lists
NetworkPolicies, pods and namespaces, and for each pod it runs in a network namespace
writes the pod's ruleset with `nft -f` inside that namespace when it changed (one
transaction: no moment without rules). The addresses of this agent's own pods count
before the API shows them (the agent hands them out), so a new instance's peers admit it
as soon as it exists. A new pod gets its rules from the last listing before its
containers start (`apply_now`), so it is never reachable as unisolated while its
policies exist. Without `nft` (or root, or namespaces) nothing is enforced and the agent
says so once; an API outage keeps the rules in force and is logged once.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cascade_dev.netpolicy import ingress_allows, ruleset

from .kube import TRANSIENT, Kube

log = logging.getLogger(__name__)

SYNC_S = 1.0
Obj = dict[str, Any]


@dataclass(frozen=True)
class LocalPod:
    pod: Obj  # as this agent knows it
    netns: str
    ip: str


LocalPods = Callable[[], list[LocalPod]]


@dataclass
class Snapshot:
    policies: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    namespaces: list[Obj] = field(default_factory=list)


def with_local_ips(pods: list[Obj], local: list[LocalPod]) -> list[Obj]:
    """The API's pods, each of this agent's with its address even before its status
    says it (and those the listing does not have yet)."""
    ips = {lp.pod["metadata"]["uid"]: lp for lp in local}
    out = []
    for pod in pods:
        mine = ips.pop(pod["metadata"]["uid"], None)
        if mine is not None and not (pod.get("status") or {}).get("podIP"):
            pod = {**pod, "status": {**(pod.get("status") or {}), "podIP": mine.ip}}
        out.append(pod)
    return out + [{**lp.pod, "status": {"podIP": lp.ip}} for lp in ips.values()]


class PolicySync:
    def __init__(
        self, kube: Kube, local: LocalPods, trusted: Sequence[str], stop: threading.Event
    ) -> None:
        self.kube, self.local, self.trusted, self.stop = kube, local, list(trusted), stop
        self.nft = shutil.which("nft")
        self._snap: Snapshot | None = None
        self._applied: dict[str, str] = {}  # netns -> the script in force
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._failing = False
        if self.nft is None:
            log.warning("no nft binary: NetworkPolicies are not enforced (apt install nftables)")

    def run(self) -> None:
        while self.nft is not None and not self.stop.is_set():
            self._wake.wait(SYNC_S)
            self._wake.clear()
            try:
                self.sync_once()
            except TRANSIENT as e:
                if not self._failing:
                    log.warning("NetworkPolicy sync: %s (rules in force stay)", e)
                self._failing = True
            else:
                if self._failing:
                    log.info("NetworkPolicy sync: the API answers again")
                self._failing = False

    def sync_once(self) -> None:
        policies = self._items("/apis/networking.k8s.io/v1/networkpolicies")
        pods = self._items("/api/v1/pods")
        namespaces = self._items("/api/v1/namespaces")
        local = self.local()
        snap = Snapshot(policies, with_local_ips(pods, local), namespaces)
        by_uid = {p["metadata"]["uid"]: p for p in snap.pods}
        with self._lock:
            self._snap = snap
            for lp in local:
                self._apply(by_uid.get(lp.pod["metadata"]["uid"], lp.pod), lp.netns, snap)
            live = {lp.netns for lp in local}
            for gone in set(self._applied) - live:
                del self._applied[gone]

    def apply_now(self, pod: Obj, netns: str) -> None:
        """The pod's rules from the last listing, before its containers start; its
        peers learn its address at the next sync, which this brings forward."""
        if self.nft is None:
            return
        with self._lock:
            if self._snap is not None:
                self._apply(pod, netns, self._snap)
        self._wake.set()

    def _items(self, path: str) -> list[Obj]:
        return list(self.kube.request("GET", path).get("items") or [])

    def _apply(self, pod: Obj, netns: str, snap: Snapshot) -> None:
        allows = ingress_allows(pod, snap.policies, snap.pods, snap.namespaces)
        script = ruleset(allows, self.trusted)
        if self._applied.get(netns) == script:
            return
        done = subprocess.run(
            ["ip", "netns", "exec", netns, str(self.nft), "-f", "-"],
            input=script, capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            log.warning("pod %s: nft failed: %s", pod["metadata"].get("name"), done.stderr.strip())
            return
        self._applied[netns] = script
        name = f"{pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}"
        log.info("pod %s: %s", name, "isolated" if allows is not None else "not isolated")
