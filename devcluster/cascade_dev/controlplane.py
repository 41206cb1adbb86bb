"""etcd, kube-apiserver, kube-controller-manager and kube-scheduler as local processes.

The argv builders are pure (unit-tested); `start_control_plane` launches whatever is not
running yet and waits for the API server's /readyz, so calling it on a running cluster
returns at once. Failures name the log file to read.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

from cascade_dev import processes
from cascade_dev.kubeapi import KubeApi
from cascade_dev.paths import (
    APISERVER_PORT,
    ETCD_BINARY,
    ETCD_CLIENT_PORT,
    ETCD_PEER_PORT,
    StatePaths,
)
from cascade_dev.pki import SERVICE_CIDR, Pki

ETCD = "etcd"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
COMPONENTS = (ETCD, APISERVER, CONTROLLER_MANAGER, SCHEDULER)  # start order
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"


class StartupError(RuntimeError):
    pass


def etcd_argv(paths: StatePaths) -> list[str]:
    client = f"http://127.0.0.1:{ETCD_CLIENT_PORT}"
    peer = f"http://127.0.0.1:{ETCD_PEER_PORT}"
    return [
        str(ETCD_BINARY),
        "--name=cascade",
        f"--data-dir={paths.etcd}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=cascade={peer}",
        "--initial-cluster-state=new",
        "--log-level=warn",
    ]


def apiserver_argv(paths: StatePaths, pki: Pki, bin_dir: Path, advertise: str) -> list[str]:
    # Endpoints may not hold loopback addresses: on the loopback fabric, don't publish them.
    reconciler = "none" if advertise.startswith("127.") else "lease"
    return [
        str(bin_dir / APISERVER),
        f"--etcd-servers=http://127.0.0.1:{ETCD_CLIENT_PORT}",
        "--bind-address=0.0.0.0",
        f"--secure-port={APISERVER_PORT}",
        "--insecure-port=0",
        f"--advertise-address={advertise}",
        f"--endpoint-reconciler-type={reconciler}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        f"--client-ca-file={pki.crt('ca')}",
        f"--tls-cert-file={pki.crt('apiserver')}",
        f"--tls-private-key-file={pki.key('apiserver')}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        f"--service-account-issuer={SA_ISSUER}",
        "--enable-admission-plugins=NodeRestriction",
        # Node names don't resolve here; reach the node agent's log server by address.
        "--kubelet-preferred-address-types=InternalIP",
        # What the chart-installed operator does (tests/integration/test_chart_install.py
        # checks its RBAC against it): requests of cascade-system's ServiceAccounts only.
        f"--audit-policy-file={audit_policy(paths)}",
        f"--audit-log-path={paths.logs / AUDIT_LOG}",
        "--audit-log-maxsize=50",
        "--audit-log-maxbackup=1",
        "--v=1",
    ]


AUDIT_LOG = "audit.log"
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:serviceaccounts:cascade-system"]
  - level: None
"""


def audit_policy(paths: StatePaths) -> Path:
    """The API server's audit policy file (written on every start: cheap, and current)."""
    path = paths.root / "audit-policy.yaml"
    paths.logs.mkdir(parents=True, exist_ok=True)
    path.write_text(AUDIT_POLICY)
    return path


def _component_argv(binary: Path, kubeconfig: Path, *flags: str) -> list[str]:
    """A controller-manager's or scheduler's command line: its kubeconfig for the API
    and for the delegated authn/authz, no serving port, no leader election."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        "--port=0",
        "--leader-elect=false",
        *flags,
        "--v=1",
    ]


def controller_manager_argv(paths: StatePaths, pki: Pki, bin_dir: Path) -> list[str]:
    return _component_argv(
        bin_dir / CONTROLLER_MANAGER,
        paths.pki / "controller-manager.kubeconfig",
        "--use-service-account-credentials=true",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.crt('ca')}",
        f"--cluster-signing-cert-file={pki.crt('ca')}",
        f"--cluster-signing-key-file={pki.key('ca')}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
    )


def scheduler_argv(paths: StatePaths, bin_dir: Path) -> list[str]:
    return _component_argv(bin_dir / SCHEDULER, paths.pki / "scheduler.kubeconfig")


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_for(
    what: str,
    check: Callable[[], bool],
    paths: StatePaths,
    name: str,
    timeout: float,
    interval: float = 0.25,
) -> None:
    """Poll `check()` with short sleeps until true; fail early when `name` has died."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if processes.running(paths, name) is None:
            raise StartupError(
                f"{name} exited while waiting for {what}; see {paths.logfile(name)}:\n"
                + processes.log_tail(paths.logfile(name))
            )
        if time.monotonic() > deadline:
            raise StartupError(
                f"timed out after {timeout:.0f}s waiting for {what}; see {paths.logfile(name)}"
            )
        time.sleep(interval)


def start_control_plane(
    paths: StatePaths, pki: Pki, bin_dir: Path, advertise: str, timeout: float = 90.0
) -> KubeApi:
    """Start what is not running and return a client once /readyz says ok."""
    paths.etcd.mkdir(parents=True, exist_ok=True)
    paths.etcd.chmod(0o700)
    processes.start(paths, ETCD, etcd_argv(paths))
    wait_for(
        f"etcd on port {ETCD_CLIENT_PORT}",
        lambda: _port_open(ETCD_CLIENT_PORT),
        paths,
        ETCD,
        timeout,
    )
    processes.start(paths, APISERVER, apiserver_argv(paths, pki, bin_dir, advertise))
    api = KubeApi(pki)
    wait_for("kube-apiserver /readyz", api.ready, paths, APISERVER, timeout)
    processes.start(paths, CONTROLLER_MANAGER, controller_manager_argv(paths, pki, bin_dir))
    processes.start(paths, SCHEDULER, scheduler_argv(paths, bin_dir))
    return api


def stop_control_plane(paths: StatePaths) -> None:
    for name in reversed(COMPONENTS):
        processes.stop(paths, name, grace=10.0 if name == ETCD else 5.0)
