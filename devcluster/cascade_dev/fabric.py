"""Pod networking for the node agent: one network namespace per pod on an emulated fabric.

`cascade dev up` builds the switches (see netlinks.py). The node agent then calls
`Fabric.load(state_dir).attach_pod(node, uid)` before starting a pod's containers and runs
them under `exec_prefix(net)`; `detach_pod(uid)` after they are gone. A pod's address is
persisted in `pods/<uid>/net.json`, so a restarted agent gets the same answer.

netns mode (root): pod netns `cxp-<uid12>`, eth0 = 198.18.<node>.<n>/16, its peer
`cxv<uid12>` unshaped on the node bridge `cxn<node>`, which reaches its leaf through a
veth shaped at the NIC rate in both directions. The host is 198.18.255.254, and each
Node's InternalIP is 198.18.<node>.1, a /32 on the host's spine bridge.
loopback mode (no root): pods bind 127.1.<node>.<n>, no namespaces, no shaping.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from cascade_dev import netlinks
from cascade_dev.netlinks import sh
from cascade_dev.paths import StatePaths
from cascade_dev.topology import (
    MODE_NETNS,
    ClusterPlan,
    allocate_pod_ip,
    pod_host_veth,
    pod_netns,
    pod_temp_veth,
)

NET_FILE = "net.json"
LAST_IPS_FILE = ".last-ips.json"  # per node: the latest pod address handed out


@dataclass(frozen=True)
class PodNet:
    ip: str
    netns: str | None  # None in loopback fallback


class Fabric:
    """The cluster's network as the node agent sees it."""

    def __init__(self, plan: ClusterPlan, state_dir: Path) -> None:
        self.plan = plan
        self.paths = StatePaths(state_dir)

    @classmethod
    def load(cls, state_dir: Path) -> Fabric:
        paths = StatePaths(Path(state_dir))
        data = json.loads(paths.cluster_json.read_text())
        return cls(ClusterPlan.from_json(data), paths.root)

    @property
    def host_ip(self) -> str:
        """Where pods reach the host and the API server (port 6443)."""
        return self.plan.host_ip

    @property
    def mode(self) -> str:
        return self.plan.mode

    def node_ip(self, node: str) -> str:
        """The Node's InternalIP: 198.18.<i>.1 (netns) or 127.1.<i>.1 (loopback)."""
        return self.plan.node(node).ip

    def exec_prefix(self, net: PodNet) -> list[str]:
        return ["ip", "netns", "exec", net.netns] if net.netns else []

    def attach_pod(self, node: str, pod_uid: str) -> PodNet:
        """Give the pod its address (and namespace); same answer on every call."""
        plan_node = self.plan.node(node)
        with self._lock():
            saved = self._read(pod_uid)
            if saved:
                ip = saved["ip"]
            else:
                last = self._last_ips()
                ip = allocate_pod_ip(self.mode, plan_node.index, self._used_ips(), last.get(node))
                _replace_json(self.paths.pods / LAST_IPS_FILE, {**last, node: ip})
            ns = pod_netns(pod_uid) if self.mode == MODE_NETNS else None
            net = PodNet(ip=ip, netns=ns)
            self._write(pod_uid, node, net)
            if ns is not None:
                self._plumb(pod_uid, plan_node.bridge, net)
            return net

    def detach_pod(self, pod_uid: str) -> None:
        """Remove the pod's namespace, veth and address record; fine if already gone."""
        with self._lock():
            if self.mode == MODE_NETNS:
                sh("ip", "netns", "del", pod_netns(pod_uid), check=False)
                sh("ip", "link", "del", pod_host_veth(pod_uid), check=False)
            with contextlib.suppress(FileNotFoundError):
                (self.paths.pod_dir(pod_uid) / NET_FILE).unlink()

    # -- internals ---------------------------------------------------------------------

    def _plumb(self, pod_uid: str, bridge: str, net: PodNet) -> None:
        assert net.netns is not None
        ns, host, temp = net.netns, pod_host_veth(pod_uid), pod_temp_veth(pod_uid)
        if self._plumbed(ns, host, bridge, net.ip):
            return  # at the fabric's MTU: `cascade dev up` sets every pod's (netlinks)
        # Partial leftovers (crash mid-way): start this pod's plumbing over.
        sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", host, check=False)
        sh("ip", "link", "del", temp, check=False)
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host, "type", "veth", "peer", "name", temp)
        sh("ip", "link", "set", temp, "netns", ns)
        sh("ip", "-n", ns, "link", "set", temp, "name", "eth0")
        sh("ip", "-n", ns, "addr", "add", f"{net.ip}/{self.plan.prefix_len}", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        netlinks.set_pod_mtu(ns, host, self.plan.mtu)
        sh("ip", "link", "set", host, "master", bridge)
        sh("ip", "link", "set", host, "up")

    @staticmethod
    def _plumbed(ns: str, host: str, bridge: str, ip: str) -> bool:
        if ns not in netlinks.netns_names():
            return False
        host_info = sh("ip", "-o", "link", "show", host, check=False)
        if f"master {bridge} " not in host_info or "state DOWN" in host_info:
            return False
        eth0 = sh("ip", "-n", ns, "-o", "-4", "addr", "show", "dev", "eth0", check=False)
        return f"inet {ip}/" in eth0

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.paths.pods.mkdir(parents=True, exist_ok=True)
        with open(self.paths.pods / ".net.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _read(self, pod_uid: str) -> dict[str, str] | None:
        path = self.paths.pod_dir(pod_uid) / NET_FILE
        try:
            data: dict[str, str] = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        return data

    def _write(self, pod_uid: str, node: str, net: PodNet) -> None:
        pod_dir = self.paths.pod_dir(pod_uid)
        pod_dir.mkdir(parents=True, exist_ok=True)
        _replace_json(pod_dir / NET_FILE, {"node": node, "ip": net.ip, "netns": net.netns})

    def _last_ips(self) -> dict[str, str]:
        """Each node's latest allocation (where its round robin goes on from)."""
        try:
            data: dict[str, str] = json.loads((self.paths.pods / LAST_IPS_FILE).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        return data

    def _used_ips(self) -> set[str]:
        used = set()
        for path in self.paths.pods.glob(f"*/{NET_FILE}"):
            with contextlib.suppress(FileNotFoundError, json.JSONDecodeError, KeyError):
                used.add(json.loads(path.read_text())["ip"])
        return used


def _replace_json(path: Path, data: Mapping[str, object]) -> None:
    """Write `data` to `path` atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data) + "\n")
    tmp.replace(path)
