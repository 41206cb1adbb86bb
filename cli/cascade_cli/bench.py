"""The `cascade bench` command group: data-plane benchmarks on the emulated fabric.

`multicast` runs Cascade's chain and binomial plans, naive parallel unicast and a gloo
broadcast on one fabric and one model, next to the M/B lower bound; it prints a table and
writes JSON. `replay` sends a production request trace, scaled to the models at hand,
open-loop to the OpenAI-compatible gateway and reports TTFT, ITL, throughput and SLO
attainment per request class. `plan` times the planner's decisions on synthetic
topologies (pure, no cluster). Heavy imports happen inside the subcommands.
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path
from types import FrameType

from cascade_cli import (
    bench_autoscale,
    bench_burst,
    bench_capacity,
    bench_coldstart,
    bench_engine,
    replay_flags,
)
from cascade_cli.bench_json import ints, names, report, say, write_json
from cascade_protocol.cli_args import from_args


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
    mc.add_argument(
        "--mtu", type=int, default=9000, help="the fabric's MTU (default 9000, jumbo frames)"
    )
    mc.add_argument("--blocks", type=int, default=16, help="blocks the model is cut into")
    mc.add_argument("--k", type=int, default=1, help="sources (the first k pods hold the model)")
    mc.add_argument("--repeat", type=int, default=1, help="runs per method (median reported)")
    mc.add_argument(
        "--methods", type=names, default=None, help="subset, e.g. chain,unicast (default all)"
    )
    mc.add_argument(
        "--chunk-kb",
        type=ints,
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
    _add_replay(cmds)
    _add_plan(cmds)
    _add_scaleup(cmds)
    bench_capacity.add(cmds)
    bench_autoscale.add(cmds)
    bench_burst.add(cmds)
    bench_coldstart.add(cmds)
    bench_engine.add(cmds)


def _add_plan(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pl = cmds.add_parser(
        "plan",
        help="planner decision time on synthetic clusters (pure, no cluster needed)",
        description="Time plan() for each strategy on synthetic topologies (leaves of 32 "
        "nodes, random NVLink cliques of 1-8 nodes, one pod per node), the topology's "
        "build and one node event on a TopologyIndex; prints a table and writes "
        "{cases: [{nodes, targets, strategy, plan_ms, topo_ms, event_ms, ...}]}.",
    )
    pl.add_argument("--nodes", type=ints, default=(100, 1_000, 10_000), help="e.g. 100,1000")
    pl.add_argument("--targets", type=ints, default=(8, 64, 512), help="e.g. 8,64,512")
    pl.add_argument(
        "--strategies", type=names, default=("chain", "binomial", "auto"), help="subset"
    )
    pl.add_argument("--repeat", type=int, default=5, help="runs per case (median reported)")
    pl.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    pl.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    from cascade_bench.plan_bench import run, table

    if args.repeat < 1:
        raise ValueError("--repeat must be >= 1")
    return report(run(args.nodes, args.targets, args.strategies, args.repeat), table, args.json)


def _add_scaleup(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    su = cmds.add_parser(
        "scaleup",
        help="one scale-up on the cluster: the ScalePlan's predicted vs measured times",
        description="Deploy the checkpoint at --model-path with --from instances, scale to "
        "--to, wait for the ScalePlan to finish and all pods Ready; print per-target "
        "predicted vs measured transfer seconds and write them as JSON. Needs an operator "
        "watching the namespace (the chart's, or --run-operator).",
    )
    su.add_argument("--model-path", type=Path, required=True, help="checkpoint on the nodes")
    su.add_argument("--from", dest="start", type=int, default=1)
    su.add_argument("--to", dest="end", type=int, default=6)
    su.add_argument("--strategy", choices=("auto", "chain", "binomial"), default="auto")
    su.add_argument("--blocks", type=int, default=16, help="multicast.blocks")
    su.add_argument("--namespace", default=None, help="existing namespace (kept)")
    su.add_argument("--run-operator", action="store_true", help="start an operator here")
    su.add_argument("--timeout-s", type=float, default=600.0)
    su.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    su.set_defaults(func=_scaleup)


def _scaleup(args: argparse.Namespace) -> int:
    from cascade_bench.scaleup import ScaleupConfig, run, table

    return report(run(from_args(ScaleupConfig, args), say=say), table, args.json)


def _add_replay(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rp = cmds.add_parser(
        "replay",
        help="replay a request trace open-loop against the gateway: TTFT, ITL, SLO attainment",
        description="Replay a request trace (TIMESTAMP,ContextTokens,GeneratedTokens) against "
        "an OpenAI-compatible gateway, open loop, and report per-class latency, throughput and "
        "SLO attainment. Token counts are scaled (round(n x scale) clamped to [1, max]) and the "
        "report says how.",
    )
    rp.add_argument("--trace", type=Path, required=True, help="trace CSV")
    rp.add_argument("--url", default=None, help="gateway base URL, e.g. http://127.0.0.1:8000")
    rp.add_argument("--model", default=None, help="model name (default: first of /v1/models)")
    rp.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    rp.add_argument("--dry-run", action="store_true", help="print the schedule, send nothing")
    rp.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    rp.add_argument("--per-request", action="store_true", help="one JSON row per request")
    w = rp.add_argument_group("window and time")
    w.add_argument("--start-s", type=float, default=0.0, help="window start, trace seconds")
    w.add_argument("--duration-s", type=float, default=None, help="window length (default: all)")
    w.add_argument("--speedup", type=float, default=1.0, help="time compression (2: 2x rate)")
    w.add_argument("--max-requests", type=int, default=None, help="first N of the window")
    t = rp.add_argument_group("token scaling")
    replay_flags.add_tokens(t)
    t.add_argument("--token-ids", default="4:259", metavar="LOW:HIGH", help="prompt token id range")
    c = rp.add_argument_group("classes and SLOs")
    c.add_argument("--batch-fraction", type=float, default=0.2, help="share sent as batch")
    c.add_argument("--seed", type=int, default=0, help="class assignment and prompt ids")
    c.add_argument(
        "--class-via",
        choices=("body", "header", "both"),
        default="body",
        help="send the class as body field request_class, header X-Request-Class, or both",
    )
    c.add_argument("--interactive-ttft-s", type=float, default=2.0)
    c.add_argument("--interactive-itl-ms", type=float, default=200.0, help="mean ITL bound")
    c.add_argument("--batch-ttft-s", type=float, default=30.0)
    c.add_argument("--batch-itl-ms", type=float, default=None, help="(default: unbounded)")
    k = rp.add_argument_group("client")
    k.add_argument("--timeout-s", type=float, default=600.0, help="per request, retries included")
    k.add_argument("--retry-429", type=int, default=0, metavar="N", help="retries after a 429")
    rp.set_defaults(func=_replay)


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # same cleanup path as Ctrl-C


def _multicast(args: argparse.Namespace) -> int:
    from cascade_bench import table
    from cascade_bench.params import METHODS, Params
    from cascade_bench.suite import run_suite

    params = from_args(
        Params,
        args,
        methods=tuple(args.methods or METHODS),
        chunk_kb=tuple(args.chunk_kb),
        node_env=tuple(args.node_env),
        wait_cluster_s=args.wait_cluster,
        quiet_wait_s=args.quiet_wait,
    )
    signal.signal(signal.SIGTERM, _sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
    doc, summaries = run_suite(params)
    print(table.report(doc, summaries))
    write_json(args.json, doc)
    return 0


def _replay(args: argparse.Namespace) -> int:
    from cascade_bench.replay.metrics import Slo
    from cascade_bench.replay.prompts import TokenRange
    from cascade_bench.replay.report import dry_run_report
    from cascade_bench.replay.report import report as replay_report
    from cascade_bench.replay.run import ReplayConfig, dry_run, run_sync

    if not args.dry_run and not args.url:
        raise ValueError("--url is required (or --dry-run)")
    if args.timeout_s <= 0 or args.retry_429 < 0:
        raise ValueError("--timeout-s must be > 0 and --retry-429 >= 0")
    ms = 1e-3
    cfg = from_args(
        ReplayConfig,
        args,
        url=args.url or "",
        scaling=replay_flags.scaling(args),
        token_range=TokenRange.parse(args.token_ids),
        slos={
            "interactive": Slo(args.interactive_ttft_s, args.interactive_itl_ms * ms),
            "batch": Slo(
                args.batch_ttft_s, None if args.batch_itl_ms is None else args.batch_itl_ms * ms
            ),
        },
        progress=not args.no_progress,
    )
    doc = dry_run(cfg) if args.dry_run else run_sync(cfg)
    report(doc, dry_run_report if args.dry_run else replay_report, args.json)
    return 130 if doc.get("interrupted") else 0
