"""Control-plane command lines and the `cascade` argument parser (no processes started)."""

from __future__ import annotations

from pathlib import Path

from cascade_cli.main import build_parser
from cascade_dev import controlplane as cp
from cascade_dev.paths import StatePaths
from cascade_dev.pki import Pki


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in argv[1:])


def test_apiserver_flags(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    flags = _flags(cp.apiserver_argv(paths, Pki(paths.pki), Path("/bin"), "198.18.255.254"))
    assert flags["secure-port"] == "6443"
    assert flags["insecure-port"] == "0"
    assert flags["bind-address"] == "0.0.0.0"
    assert flags["advertise-address"] == "198.18.255.254"
    assert flags["service-cluster-ip-range"] == "198.19.0.0/16"
    assert flags["authorization-mode"] == "Node,RBAC"
    assert flags["service-account-issuer"] == "https://kubernetes.default.svc.cluster.local"
    assert flags["etcd-servers"] == "http://127.0.0.1:23790"
    assert flags["endpoint-reconciler-type"] == "lease"
    loop = _flags(cp.apiserver_argv(paths, Pki(paths.pki), Path("/bin"), "127.0.0.1"))
    assert loop["endpoint-reconciler-type"] == "none"


def test_etcd_and_controllers(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    etcd = _flags(cp.etcd_argv(paths))
    assert etcd["data-dir"] == str(tmp_path / "etcd")
    assert etcd["listen-peer-urls"] == "http://127.0.0.1:23800"
    cm = _flags(cp.controller_manager_argv(paths, Pki(paths.pki), Path("/bin")))
    assert cm["leader-elect"] == "false"
    assert cm["use-service-account-credentials"] == "true"
    assert cm["service-account-private-key-file"] == str(tmp_path / "pki" / "sa.key")
    assert _flags(cp.scheduler_argv(paths, Path("/bin")))["leader-elect"] == "false"


def test_cli_parser() -> None:
    parser = build_parser()
    args = parser.parse_args(["dev", "up", "--nodes", "2", "--nic-mbit", "200"])
    assert (args.nodes, args.nic_mbit, args.gpus_per_node, args.spine_mbit) == (2, 200, 8, None)
    assert parser.parse_args(["dev", "url", "ns/svc:80"]).target == "ns/svc:80"
    for cmd in ("down", "kubeconfig", "status"):
        assert callable(parser.parse_args(["dev", cmd]).func)
