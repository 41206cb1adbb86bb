"""`cascade dev up/down/status/url`: the lifecycle of the local cluster.

`up` is a reconcile. Every step (binaries, PKI, kubeconfigs, control plane, Prometheus,
node agent) checks before it acts; then `clusterdiff` compares what runs with the plan
the flags ask for and `up` carries out the difference, one line per change: surplus nodes
drained and deleted with their links, new ones added, links reshaped to `--nic-mbit` /
`--spine-mbit`, the labels that carry them patched, CPU quotas set in place, and the
node agent restarted on the new cluster.json (`--storage-mbit`: pods it starts from then
on read at the new rate). An identical re-run changes nothing; `--no-prometheus` stops
Prometheus. `down` stops everything in reverse, sweeps whatever still runs for the state
dir, removes the CPU quota groups, deletes the fabric and wipes etcd, pods and
Prometheus' data.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cascade_dev import cgroups, controlplane, monitor, netlinks, processes, reconcile, toolchain
from cascade_dev.clusterdiff import AgentRestarted, diff
from cascade_dev.controlplane import CONTROLLER_MANAGER
from cascade_dev.kubeapi import KubeApi
from cascade_dev.kubeconfig import write_kubeconfig
from cascade_dev.paths import StatePaths, venv_python
from cascade_dev.pki import Pki, ensure_pki
from cascade_dev.prometheus import PROMETHEUS
from cascade_dev.topology import (
    DEFAULT_MTU,
    DEFAULT_STORAGE_MBIT,
    MODE_NETNS,
    ClusterPlan,
    plan_cluster,
)
from cascade_dev.urls import parse_target, resolve_url

AGENT = "nodeagent"
AGENT_MODULE = "cascade_dev.nodeagent"


@dataclass(frozen=True)
class UpOptions:
    nodes: int = 4
    gpus_per_node: int = 8
    nic_mbit: int = 1000
    spine_mbit: int | None = None
    nodes_per_leaf: int = 4
    fabric: str = "auto"  # auto | netns | loopback
    timeout: float = 120.0
    wait_nodes: bool = True
    node_cpu: float | None = None  # cores of CPU quota per node; None: unlimited
    storage_mbit: int = DEFAULT_STORAGE_MBIT  # pods' model storage read rate; 0: unlimited
    mtu: int = DEFAULT_MTU  # the fabric's (topology.py)
    prometheus: bool = True  # run Prometheus (docs/observability.md); False stops it


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _write_plan(paths: StatePaths, plan: ClusterPlan) -> None:
    """Write cluster.json (atomically: the node agent may read it any time)."""
    text = json.dumps(plan.to_json(), indent=2) + "\n"
    if paths.cluster_json.exists() and paths.cluster_json.read_text() == text:
        return
    tmp = paths.cluster_json.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(paths.cluster_json)


def load_plan(paths: StatePaths) -> ClusterPlan | None:
    try:
        return ClusterPlan.from_json(json.loads(paths.cluster_json.read_text()))
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None


def agent_available() -> bool:
    try:
        return importlib.util.find_spec(f"{AGENT_MODULE}.__main__") is not None
    except ImportError:
        return False


def up(paths: StatePaths, opts: UpOptions) -> ClusterPlan:
    mode = netlinks.choose_mode(opts.fabric)
    toolchain.ensure_system_tools(need_ip=mode == MODE_NETNS)
    bin_dir = toolchain.ensure_kube_binaries()
    plan = plan_cluster(
        opts.nodes,
        mode=mode,
        gpus_per_node=opts.gpus_per_node,
        nic_mbit=opts.nic_mbit,
        spine_mbit=opts.spine_mbit,
        nodes_per_leaf=opts.nodes_per_leaf,
        node_cpu=opts.node_cpu,
        storage_mbit=opts.storage_mbit or None,
        mtu=opts.mtu,
    )
    if opts.node_cpu is not None:
        _check_cpu_quota()
    old = load_plan(paths)
    if old and old.mode != plan.mode and processes.running(paths, controlplane.APISERVER):
        raise RuntimeError(f"cluster runs a {old.mode} fabric; `cascade dev down` to switch")
    paths.root.mkdir(parents=True, exist_ok=True)
    pki = ensure_pki(paths.pki)
    write_kubeconfig(paths.kubeconfig, pki, "admin")
    for stem in ("controller-manager", "scheduler"):
        write_kubeconfig(paths.pki / f"{stem}.kubeconfig", pki, stem)
    _log(f"control plane: starting what is not running (logs in {paths.logs})")
    api = controlplane.start_control_plane(paths, pki, bin_dir, plan.host_ip, opts.timeout)
    changes = diff(reconcile.observe(api, old, plan.mode), plan)
    agent_running = processes.running(paths, AGENT) is not None
    reconcile.drain(api, changes, agent_running, opts.timeout)  # while the old agent runs
    _write_plan(paths, plan)
    netlinks.ensure_switches(plan)
    reconcile.apply_quotas(changes)
    if not opts.prometheus:
        monitor.stop(paths)
    elif (prom := monitor.ensure(paths, opts.timeout)) is not None:
        _log(f"prometheus: {prom}")
    agent = agent_available()
    if agent:
        if any(isinstance(c, AgentRestarted) for c in changes):
            processes.stop(paths, AGENT)
        processes.start(
            paths,
            AGENT,
            [venv_python(), "-m", AGENT_MODULE, "--state-dir", str(paths.root)],
            env={"KUBECONFIG": str(paths.kubeconfig)},
        )
    else:
        _log(f"warning: {AGENT_MODULE} is not installed; nodes will not register")
    reconcile.finish(api, changes)  # after the restart: the old agent would re-register
    for change in changes:
        _log(change.line())
    if old is not None and not changes:
        _log("no changes")
    if agent and opts.wait_nodes:
        wait_nodes_ready(paths, api, plan, opts.timeout)
    return plan


def _check_cpu_quota() -> None:
    """Refuse --node-cpu up front where the agent could not enforce it."""
    cg = cgroups.CpuCgroups.detect()
    problem = "no cgroup cpu controller (v1 cpu or v2 cpu.max)" if cg is None else cg.problem()
    if problem is not None:
        raise RuntimeError(f"--node-cpu: {problem}")


def _release_cpu_groups() -> None:
    """After the pods are dead: no group of ours is left in the cpu hierarchy."""
    cg = cgroups.CpuCgroups.detect()
    if cg is None:
        return
    try:
        cg.release_all()
        cgroups.unexpose()
    except (OSError, cgroups.CgroupError) as e:
        _log(f"warning: CPU quota groups left behind: {e}")


def ready_nodes(api: KubeApi) -> set[str]:
    ready = set()
    for item in api.get("/api/v1/nodes").get("items", []):
        for cond in item.get("status", {}).get("conditions") or []:
            if cond.get("type") == "Ready" and cond.get("status") == "True":
                ready.add(item["metadata"]["name"])
    return ready


def wait_nodes_ready(paths: StatePaths, api: KubeApi, plan: ClusterPlan, timeout: float) -> None:
    wanted = {n.name for n in plan.nodes}
    controlplane.wait_for(
        f"nodes {sorted(wanted)} to be Ready",
        lambda: wanted <= ready_nodes(api),
        paths,
        AGENT,
        timeout,
        interval=0.5,
    )
    # Pods are refused until the controller-manager has made the namespace's ServiceAccount.
    path = "/api/v1/namespaces/default/serviceaccounts/default"
    controlplane.wait_for(
        "the default ServiceAccount",
        lambda: api.request("GET", path)[0] == 200,
        paths,
        CONTROLLER_MANAGER,
        timeout,
        interval=0.5,
    )


def _pod_pids(paths: StatePaths) -> list[int]:
    pids = [processes.read_pid(p) for p in paths.pods.glob("*/*.pid")]
    return [p for p in pids if p is not None]


def _netns_pids() -> list[int]:
    names = [n for n in netlinks.netns_names() if n.startswith("cxp-")]
    return [pid for ns in names for pid in netlinks.netns_pids(ns)]


def _unmount_under(root: Path) -> None:
    """Lazily unmount anything left mounted inside the state dir (e.g. pod volumes)."""
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for mnt in sorted((m for m in mounts if m.startswith(f"{root}/")), reverse=True):
        subprocess.run(["umount", "-l", mnt], check=False, capture_output=True)


def down(paths: StatePaths) -> None:
    monitor.stop(paths)
    processes.stop(paths, AGENT)
    processes.terminate(_pod_pids(paths) + _netns_pids(), grace=5.0)
    controlplane.stop_control_plane(paths)
    processes.terminate(processes.stragglers(paths.root), grace=3.0)
    _release_cpu_groups()
    if paths.root.exists():
        _unmount_under(paths.root)
    if netlinks.choose_mode("auto") == MODE_NETNS:
        netlinks.teardown()
    for path in (paths.etcd, paths.pods, paths.prometheus):
        shutil.rmtree(path, ignore_errors=True)
    for pidfile in paths.root.glob("*.pid"):
        pidfile.unlink()
    with contextlib.suppress(FileNotFoundError):
        paths.cluster_json.unlink()


def url(paths: StatePaths, target_text: str) -> str:
    if target_text == PROMETHEUS:
        return monitor.url(paths)
    target = parse_target(target_text)
    api = KubeApi(Pki(paths.pki))
    base = f"/api/v1/namespaces/{target.namespace}"
    service = api.get(f"{base}/services/{target.service}")
    endpoints = api.get(f"{base}/endpoints/{target.service}")
    return resolve_url(service, endpoints, target.port)


def status(paths: StatePaths) -> str:
    lines = [f"state dir: {paths.root}"]
    for name in (*controlplane.COMPONENTS, AGENT, *monitor.NAMES):
        pid = processes.running(paths, name)
        lines.append(f"  {name:24} {'running pid ' + str(pid) if pid else 'stopped'}")
    plan = load_plan(paths)
    if plan is None:
        lines.append("cluster: down")
        return "\n".join(lines)
    storage = f"{plan.storage_mbit} Mbit/s" if plan.storage_mbit else "unlimited"
    lines.append(
        f"fabric: {plan.mode}, host {plan.host_ip}, spine {plan.spine_mbit} Mbit/s, "
        f"storage {storage}"
    )
    api = KubeApi(Pki(paths.pki))
    up_now = api.ready()
    lines.append(f"apiserver: {'ready' if up_now else 'not ready'} (kubeconfig {paths.kubeconfig})")
    ready = ready_nodes(api) if up_now else set()
    cg = cgroups.CpuCgroups.detect()
    for n in plan.nodes:
        state = "Ready" if n.name in ready else "NotReady"
        cpu = f" cpu={n.cpu:g}" if n.cpu is not None else ""
        if cpu and cg is not None:
            s = cg.stat(n.name)
            cpu += f" (throttled {s.get('nr_throttled', 0)}/{s.get('nr_periods', 0)} periods)"
        lines.append(
            f"  {n.name:18} {state:9} {n.ip:15} {n.leaf} {n.zone} gpus={n.gpus} "
            f"nic={n.nic_in_mbit}Mbit/s{cpu}"
        )
    return "\n".join(lines)
