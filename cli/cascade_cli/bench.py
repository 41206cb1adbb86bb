"""The `cascade bench` command group: data-plane benchmarks on the emulated fabric.

`multicast` runs Cascade's chain and binomial plans, naive parallel unicast and a gloo
broadcast on one fabric and one model, next to the M/B lower bound; it prints a table and
writes JSON. Heavy imports happen inside the subcommand.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _env(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = sub.add_parser("bench", help="benchmarks on the local cluster's emulated fabric")
    cmds = group.add_subparsers(dest="bench_cmd", required=True, metavar="COMMAND")
    mc = cmds.add_parser(
        "multicast",
        help="chain vs binomial vs unicast vs gloo vs M/B (needs root: netns fabric)",
    )
    mc.add_argument("--nodes", type=int, default=8, help="simulated nodes, sources included")
    mc.add_argument("--model-mb", type=float, default=200, help="model size in 10^6 bytes")
    mc.add_argument("--nic-mbit", type=int, default=200, help="NIC rate, each direction")
    mc.add_argument(
        "--spine-mbit",
        type=int,
        default=None,
        help="leaf-spine rate (default nodes-per-leaf x NIC)",
    )
    mc.add_argument("--nodes-per-leaf", type=int, default=4)
    mc.add_argument("--blocks", type=int, default=16, help="blocks the model is cut into")
    mc.add_argument("--k", type=int, default=1, help="sources (the first k pods hold the model)")
    mc.add_argument("--repeat", type=int, default=1, help="runs per method (median reported)")
    mc.add_argument(
        "--methods", type=_names, default=None, help="subset, e.g. chain,unicast (default all)"
    )
    mc.add_argument(
        "--chunk-kb",
        type=_ints,
        default=(),
        help="Cascade chunk sizes to try, e.g. 1024,256 (the first is reported as the method "
        "itself, the others as METHOD@SIZEK; default: the executor's)",
    )
    mc.add_argument(
        "--node-env",
        type=_env,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment for Cascade nodes, e.g. UCX_TCP_TX_SEG_SIZE=64k (repeatable)",
    )
    mc.add_argument(
        "--link-mb", type=float, default=100, help="MB for the one-link check (0: skip)"
    )
    mc.add_argument(
        "--loopback-mb", type=float, default=256, help="MB for the loopback check (0: skip)"
    )
    mc.add_argument("--workdir", type=Path, default=Path("/tmp/cascade-bench"))
    mc.add_argument("--model-dir", type=Path, default=None, help="existing checkpoint to use")
    mc.add_argument("--state-dir", type=Path, default=None, help="cluster state dir")
    mc.add_argument(
        "--wait-cluster", type=float, default=600, help="seconds to wait for a busy cluster"
    )
    mc.add_argument(
        "--quiet-wait",
        type=float,
        default=120,
        help="seconds to wait before each step for other load on the host to end",
    )
    mc.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    mc.set_defaults(func=_multicast)


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # same cleanup path as Ctrl-C


def _multicast(args: argparse.Namespace) -> int:
    from cascade_bench.params import METHODS, Params
    from cascade_bench.suite import run_suite
    from cascade_bench.table import report

    params = Params(
        nodes=args.nodes,
        model_mb=args.model_mb,
        nic_mbit=args.nic_mbit,
        spine_mbit=args.spine_mbit,
        nodes_per_leaf=args.nodes_per_leaf,
        blocks=args.blocks,
        k=args.k,
        repeat=args.repeat,
        methods=tuple(args.methods or METHODS),
        chunk_kb=tuple(args.chunk_kb),
        node_env=tuple(args.node_env),
        link_mb=args.link_mb,
        loopback_mb=args.loopback_mb,
        workdir=args.workdir,
        model_dir=args.model_dir,
        state_dir=args.state_dir,
        wait_cluster_s=args.wait_cluster,
        quiet_wait_s=args.quiet_wait,
    )
    signal.signal(signal.SIGTERM, _sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
    doc, summaries = run_suite(params)
    print(report(doc, summaries))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"\nwrote {args.json}", file=sys.stderr)
    return 0
