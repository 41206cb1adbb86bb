"""`cascade bench capacity`: one instance's throughput and ITL vs batch size under its
node's CPU quota, and 1 vs 2 instances (issue 10 §1). Registered by `bench.add_parser`;
the work is in `cascade_bench.capacity` (imported when the command runs)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cascade_cli.bench_json import ints, report, say
from cascade_protocol.cli_args import from_args


def add(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cp = cmds.add_parser(
        "capacity",
        help="one instance's tokens/s and ITL vs batch size, and 1 vs 2 instances",
        description="On a running `cascade dev up --nodes 3 --node-cpu C` cluster: deploy "
        "the model in a fresh namespace with its own operator, keep b requests in flight "
        "to one worker for each batch size (tokens/s, ITL p50/p90 per token), then compare "
        "1 and 2 instances (on two nodes) at one concurrency, split evenly over the "
        "workers. Prints a table; --json writes the capacity profile, --png the curves.",
    )
    cp.add_argument(
        "--model-path", type=Path, default=Path("/var/lib/cascade/models/tiny-llama"),
        help="checkpoint on the nodes (cascade model init)",
    )  # fmt: skip
    cp.add_argument("--batches", type=ints, default=(1, 2, 4, 8, 16, 32), help="e.g. 1,4,16")
    cp.add_argument(
        "--concurrency", type=int, default=None,
        help="in flight for 1 vs 2 instances (default: 2 x the curve's knee)",
    )  # fmt: skip
    cp.add_argument(
        "--instances", type=int, default=1,
        help="measure the curve and prefill with this many instances (on as many nodes) "
        "busy at once, per instance: the profile under a whole deployment's contention",
    )  # fmt: skip
    cp.add_argument("--max-tokens", type=int, default=64, help="per request (ignore_eos)")
    cp.add_argument("--prompt-tokens", type=int, default=16)
    cp.add_argument("--warmup-s", type=float, default=4.0, help="before each window")
    cp.add_argument("--duration-s", type=float, default=12.0, help="each measured window")
    cp.add_argument("--timeout-s", type=float, default=300.0, help="waiting for Ready")
    cp.add_argument("--kubeconfig", type=Path, default=None, help="(default: the dev cluster's)")
    cp.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    cp.add_argument("--png", type=Path, default=None, metavar="OUT.png")
    cp.set_defaults(func=_capacity)


def _capacity(args: argparse.Namespace) -> int:
    from cascade_bench.capacity.report import plot, table
    from cascade_bench.capacity.run import CapacityConfig, run
    from cascade_dev.paths import StatePaths, default_state_dir

    kubeconfig = args.kubeconfig or Path(
        os.environ.get("KUBECONFIG") or StatePaths(default_state_dir()).kubeconfig
    )
    doc = run(from_args(CapacityConfig, args, kubeconfig=kubeconfig), say=say)
    report(doc, table, args.json, args.png, plot)
    return 0 if doc["scaling"]["passed"] else 1
