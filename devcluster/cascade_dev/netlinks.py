"""Switch-level plumbing of the emulated fabric: bridges, shaped veths, pod namespaces.

Thin wrappers around `ip` and `tc` (run as root). `ensure_switches` builds what a
`ClusterPlan` describes and prunes what it no longer does, and replaces a link's tbf only
where its rate differs (a replaced qdisc drops what it queued), so a second `cascade dev
up` is a cheap no-op and one with another `--nic-mbit` reshapes every link it changes;
`teardown` removes every `cxp-*` namespace and `cx*` link.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from cascade_dev.topology import (
    MODE_LOOPBACK,
    MODE_NETNS,
    POD_NETNS_PREFIX,
    POD_VETH_PREFIX,
    ClusterPlan,
    link_names,
    parse_tbf_rates,
    tbf_args,
)

BR_NF = Path("/proc/sys/net/bridge")
# Switch-level names this module owns; pod veths (cxv*, cxq*) belong to attach_pod.
_SWITCH_LINK = re.compile(r"^cx(spine|leaf\d+|lu\d+|ld\d+|n\d+|nu\d+|nd\d+)$")


class FabricError(RuntimeError):
    pass


def sh(*cmd: str, check: bool = True) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise FabricError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def choose_mode(requested: str = "auto") -> str:
    """netns when we are root and have `ip` and `tc`; otherwise loopback."""
    capable = os.geteuid() == 0 and bool(shutil.which("ip")) and bool(shutil.which("tc"))
    if requested == MODE_NETNS and not capable:
        raise FabricError("netns fabric needs root and the `ip`/`tc` tools (iproute2)")
    if requested in (MODE_NETNS, MODE_LOOPBACK):
        return requested
    return MODE_NETNS if capable else MODE_LOOPBACK


def links() -> set[str]:
    """Names of the links in the root namespace (`veth@peer` reduced to `veth`)."""
    if not shutil.which("ip"):
        return set()
    out = sh("ip", "-o", "link", "show")
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}


def switch_links() -> set[str]:
    """The switch-level links of the fabric (bridges and shaped veths, not pods')."""
    return {n for n in links() if _SWITCH_LINK.match(n)}


def tbf_rates() -> dict[str, int]:
    """Root tbf rate (Mbit/s) of every link that has one."""
    if not shutil.which("tc"):
        return {}
    return parse_tbf_rates(sh("tc", "-j", "qdisc", "show"))


def netns_names() -> set[str]:
    if not shutil.which("ip"):
        return set()
    return {line.split()[0] for line in sh("ip", "netns", "list").splitlines() if line.strip()}


def _sysctl(key: str, value: str) -> None:
    path = Path("/proc/sys") / key.replace(".", "/")
    if path.exists():
        path.write_text(value + "\n")


def _bridge(name: str, have: set[str], mtu: int, host_facing: bool = False) -> None:
    if name not in have:
        sh("ip", "link", "add", name, "type", "bridge", "stp_state", "0")
    sh("ip", "link", "set", name, "mtu", str(mtu))  # set, so ports joining keep it
    _sysctl(f"net.ipv6.conf.{name}.disable_ipv6", "1")
    if not host_facing:
        # The host owns 198.18.255.254 on the spine only. Without this, leaf and node
        # bridges would answer ARP for it too and pods would reach the host unshaped.
        _sysctl(f"net.ipv4.conf.{name}.arp_ignore", "8")
    sh("ip", "link", "set", name, "up")


def _shaped_pair(
    a: str,
    a_master: str,
    a_mbit: int,
    b: str,
    b_master: str,
    b_mbit: int,
    have: set[str],
    rates: dict[str, int],
    mtu: int,
) -> None:
    """veth a<->b; each end's egress is one direction, so both are shaped."""
    if a not in have or b not in have:
        sh("ip", "link", "del", a, check=False)
        sh("ip", "link", "del", b, check=False)
        sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
        rates = {}
    for dev, master, mbit in ((a, a_master, a_mbit), (b, b_master, b_mbit)):
        sh("ip", "link", "set", dev, "mtu", str(mtu))
        sh("ip", "link", "set", dev, "master", master)
        if rates.get(dev) != mbit:
            sh("tc", "qdisc", "replace", "dev", dev, "root", "tbf", *tbf_args(mbit))
        sh("ip", "link", "set", dev, "up")


def _disable_bridge_netfilter() -> None:
    """With br_netfilter loaded, bridged frames would traverse iptables; keep them out."""
    for name in ("bridge-nf-call-iptables", "bridge-nf-call-ip6tables", "bridge-nf-call-arptables"):
        path = BR_NF / name
        if path.exists():
            path.write_text("0\n")


def ensure_switches(plan: ClusterPlan) -> None:
    """Create or repair the spine, leaves and node bridges; prune leftovers of older plans."""
    if plan.mode != MODE_NETNS:
        return
    _disable_bridge_netfilter()
    have = links()
    wanted = set(link_names(plan))
    for stale in sorted(n for n in have if _SWITCH_LINK.match(n) and n not in wanted):
        sh("ip", "link", "del", stale, check=False)
    have, rates = links(), tbf_rates()
    _bridge(plan.spine_bridge, have, plan.mtu, host_facing=True)
    sh("ip", "addr", "replace", f"{plan.host_ip}/{plan.prefix_len}", "dev", plan.spine_bridge)
    _sync_node_addresses(plan)
    for lf in plan.leaves:
        _bridge(lf.bridge, have, plan.mtu)
        _shaped_pair(
            lf.up_veth,
            lf.bridge,
            lf.spine_mbit,
            lf.down_veth,
            plan.spine_bridge,
            lf.spine_mbit,
            have,
            rates,
            plan.mtu,
        )
    for n in plan.nodes:
        _bridge(n.bridge, have, plan.mtu)
        leaf = plan.leaves[n.leaf_index].bridge
        _shaped_pair(
            n.up_veth, n.bridge, n.nic_out_mbit, n.down_veth, leaf, n.nic_in_mbit, have, rates,
            plan.mtu,
        )  # fmt: skip
    _sync_pod_mtus(plan.mtu)


def set_pod_mtu(ns: str, host_veth: str, mtu: int) -> None:
    """A pod's NIC (both veth ends) at the fabric's MTU: a bridge drops a frame larger
    than the port it leaves by, so pod and fabric must agree."""
    sh("ip", "link", "set", host_veth, "mtu", str(mtu), check=False)
    sh("ip", "-n", ns, "link", "set", "eth0", "mtu", str(mtu), check=False)


def _sync_pod_mtus(mtu: int) -> None:
    """Pods plumbed before `cascade dev up --mtu` changed it follow the fabric."""
    for ns in sorted(n for n in netns_names() if n.startswith(POD_NETNS_PREFIX)):
        set_pod_mtu(ns, POD_VETH_PREFIX + ns.removeprefix(POD_NETNS_PREFIX), mtu)


def _sync_node_addresses(plan: ClusterPlan) -> None:
    """Node InternalIPs are /32s on the spine bridge: local addresses pods can reach."""
    out = sh("ip", "-o", "-4", "addr", "show", "dev", plan.spine_bridge)
    present = set(re.findall(r"inet (\S+/32)", out))
    wanted = {f"{n.ip}/32" for n in plan.nodes}
    for addr in sorted(present - wanted):
        sh("ip", "addr", "del", addr, "dev", plan.spine_bridge, check=False)
    for addr in sorted(wanted - present):
        sh("ip", "addr", "add", addr, "dev", plan.spine_bridge)


def netns_pids(ns: str) -> list[int]:
    out = sh("ip", "netns", "pids", ns, check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def teardown() -> None:
    """Delete every cxp-* namespace and every cx* link (processes must be gone already)."""
    for ns in sorted(n for n in netns_names() if n.startswith("cxp-")):
        sh("ip", "netns", "del", ns, check=False)
    for name in sorted(n for n in links() if n.startswith("cx")):
        sh("ip", "link", "del", name, check=False)
    _release_netns_dir()


def _release_netns_dir() -> None:
    """`ip netns add` bind-mounts /run/netns onto itself; undo that once it is empty."""
    run = Path("/run/netns")
    mounted = any(
        line.split()[4] == str(run)
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )
    if mounted and run.is_dir() and not any(run.iterdir()):
        sh("umount", str(run), check=False)
