"""The `cascade dev` command group: argparse wiring over cluster.py.

`cascade_cli.main` calls `add_parser`; each subcommand sets `func(args) -> int`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cascade_dev import cluster
from cascade_dev.cpuquota import check_cores
from cascade_dev.paths import StatePaths, default_state_dir
from cascade_dev.topology import DEFAULT_MTU, DEFAULT_STORAGE_MBIT
from cascade_dev.urls import ResolveError


def _paths(args: argparse.Namespace) -> StatePaths:
    return StatePaths(args.state_dir or default_state_dir())


def _cores(text: str) -> float:
    """`--node-cpu` checked while parsing, before anything starts."""
    try:
        return check_cores(float(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _mbit_or_off(text: str) -> int:
    """`--storage-mbit`: a whole rate in Mbit/s, 0 meaning no limit."""
    try:
        mbit = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of Mbit/s: {text!r}") from None
    if mbit < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (unlimited) or more: {mbit}")
    return mbit


def _up(args: argparse.Namespace) -> int:
    opts = cluster.UpOptions(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        nic_mbit=args.nic_mbit,
        spine_mbit=args.spine_mbit,
        nodes_per_leaf=args.nodes_per_leaf,
        fabric=args.fabric,
        timeout=args.timeout,
        wait_nodes=not args.no_wait,
        node_cpu=args.node_cpu,
        storage_mbit=args.storage_mbit,
        mtu=args.mtu,
        prometheus=not args.no_prometheus,
    )
    paths = _paths(args)
    plan = cluster.up(paths, opts)
    print(
        f"cluster up: {len(plan.nodes)} node(s), {plan.mode} fabric; "
        f"export KUBECONFIG={paths.kubeconfig}",
        file=sys.stderr,
    )
    return 0


def _down(args: argparse.Namespace) -> int:
    cluster.down(_paths(args))
    print("cluster down", file=sys.stderr)
    return 0


def _kubeconfig(args: argparse.Namespace) -> int:
    print(_paths(args).kubeconfig)
    return 0


def _url(args: argparse.Namespace) -> int:
    try:
        print(cluster.url(_paths(args), args.target))
    except ResolveError as exc:
        print(f"cascade dev url: {exc}", file=sys.stderr)
        return 1
    return 0


def _status(args: argparse.Namespace) -> int:
    print(cluster.status(_paths(args)))
    return 0


def add_parser(groups: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dev = groups.add_parser("dev", help="run a local Kubernetes cluster with simulated GPU nodes")
    dev.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="cluster state directory (default $CASCADE_DEV_DIR or ~/.local/state/cascade/dev)",
    )
    sub = dev.add_subparsers(dest="dev_command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", help="start (or reconcile) the cluster")
    up.add_argument("--nodes", type=int, default=4, help="simulated GPU nodes (default 4)")
    up.add_argument("--gpus-per-node", type=int, default=8)
    up.add_argument("--nic-mbit", type=int, default=1000, help="node NIC rate, each direction")
    up.add_argument(
        "--spine-mbit", type=int, default=None, help="leaf<->spine link rate (default: --nic-mbit)"
    )
    up.add_argument("--nodes-per-leaf", type=int, default=4)
    up.add_argument(
        "--fabric",
        choices=("auto", "netns", "loopback"),
        default="auto",
        help="netns needs root; auto picks it when possible",
    )
    up.add_argument(
        "--node-cpu",
        type=_cores,
        default=None,
        metavar="CORES",
        help="hold each node's pods (not the operator or gateway) to CORES cores of CPU, "
        "e.g. 0.5, so capacity grows with nodes as with GPUs (root; default: no quota)",
    )
    up.add_argument(
        "--storage-mbit",
        type=_mbit_or_off,
        default=DEFAULT_STORAGE_MBIT,
        metavar="MBIT",
        help="rate at which pods read model storage (checkpoints), so loading from storage "
        f"is 10x slower than the default NIC as on real clusters; 0: unlimited "
        f"(default {DEFAULT_STORAGE_MBIT})",
    )
    up.add_argument(
        "--mtu",
        type=int,
        default=DEFAULT_MTU,
        help=f"MTU of every fabric link and pod NIC (default {DEFAULT_MTU}: jumbo frames, "
        "as GPU clusters' data fabrics run; 1500 for a plain Ethernet fabric)",
    )
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait per phase")
    up.add_argument("--no-wait", action="store_true", help="don't wait for nodes to be Ready")
    up.add_argument(
        "--no-prometheus",
        action="store_true",
        help="don't run Prometheus, and stop it if it runs (by default it runs; "
        "`cascade dev url prometheus` prints its URL)",
    )
    up.set_defaults(func=_up)

    sub.add_parser("down", help="stop everything and delete the fabric").set_defaults(func=_down)
    sub.add_parser("kubeconfig", help="print the admin kubeconfig path").set_defaults(
        func=_kubeconfig
    )
    url = sub.add_parser(
        "url", help="print http://IP:PORT of a ready endpoint of a Service, or of Prometheus"
    )
    url.add_argument("target", metavar="NAMESPACE/SERVICE[:PORT] | prometheus")
    url.set_defaults(func=_url)
    sub.add_parser("status", help="show processes, fabric and nodes").set_defaults(func=_status)
