"""`cascade bench burst`: one burst met by stop-the-world, execute-while-load pipelines,
cooperative execution, all-cached and pre-scaled deployments (issue 11's benchmark).
Registered by `bench.add_parser`; the work is in `cascade_bench.burst` (imported when
it runs)."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

from cascade_cli.bench_json import report, say, subset
from cascade_protocol.cli_args import from_args

PROFILE = Path("bench/results/capacity-0.2-p180.json")


def _modes(text: str) -> tuple[str, ...]:
    from cascade_bench.burst.modes import MODES

    return subset(text, MODES, "modes")


def _cpu(text: str) -> float | None:
    return None if text.lower() == "none" else float(text)


def add(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ap = cmds.add_parser(
        "burst",
        help="a burst met by stop-the-world, pipelines, cooperative, all-cached, pre-scaled",
        description="One instance serves a steady warm-up (--warmup-x of its capacity for "
        "--warmup-s), then the trace's busiest --burst-s window arrives, its rate scaled "
        "from the capacity profile to --burst-x instances of demand, and at its start the "
        "deployment scales 1 -> --scale-to (the scale decision, through /scale). The same "
        "load runs once per mode, one after another, each in a fresh namespace with its "
        "own operator: stop_the_world (liveScaling off), pipelines (liveScaling on, "
        "cooperative off), cooperative (both on), all_cached (multicast.fromPeers false: "
        "new instances load from their disk), prescaled (N replicas before the burst). "
        "Per mode: P50/P99 TTFT of the burst's requests, time from the decision to the "
        "first token from new capacity, interactive TTFT SLO attainment, errors. Prints a "
        "table; --out writes the JSON, --plot the timeline PNG. The defaults are the "
        "measured setup (bench/README.md says why): tiny-llama in 4 blocks, chain "
        "multicast paced to 6 Mbit/s per sender (about 10 s for the whole transfer), 4 "
        "nodes at 0.2 core, 1 -> 4, a 60 s burst at 3x one instance after 30 s at 0.5x, "
        "TTFT SLO 5 s. Uses a running `cascade dev` cluster that fits (left running), or "
        "brings one up and takes it down.",
    )
    ap.add_argument(
        "--trace", type=Path, required=True, help="CSV: TIMESTAMP,ContextTokens,GeneratedTokens"
    )
    ap.add_argument(
        "--profile", type=Path, default=PROFILE,
        help="capacity profile JSON of the model at --node-cpu (cascade bench capacity; "
        f"default {PROFILE})",
    )  # fmt: skip
    ap.add_argument(
        "--modes",
        type=_modes,
        default=None,
        help="subset in order, e.g. pipelines,prescaled (default: all five)",
    )
    ap.add_argument("--out", type=Path, default=None, metavar="OUT.json")
    ap.add_argument("--plot", type=Path, default=None, metavar="OUT.png")
    ap.add_argument("--per-request", action="store_true", help="records and samples in the JSON")
    ap.add_argument("--dry-run", action="store_true", help="no cluster: the load only")
    c = ap.add_argument_group("cluster")
    c.add_argument("--nodes", type=int, default=4, help="nodes the cluster must have (default 4)")
    c.add_argument(
        "--node-cpu", type=_cpu, default=0.2,
        help="cores per node (quota; default 0.2); 'none': use a running cluster whatever "
        "its quota (smoke runs; the profile is then not checked against it)",
    )  # fmt: skip
    c.add_argument(
        "--scale-to", type=int, default=4, help="N: instances after the decision (default 4)"
    )
    c.add_argument(
        "--gpus-per-instance", type=int, default=None,
        help="GPUs each instance asks for (default: a node's, so one instance per node, "
        "its quota to itself; 1 lets a smoke run share nodes)",
    )  # fmt: skip
    c.add_argument("--state-dir", type=Path, default=None, help="dev cluster state dir")
    c.add_argument("--ready-timeout-s", type=float, default=300.0, help="(default 300)")
    d = ap.add_argument_group("deployment")
    d.add_argument(
        "--model-uri",
        default=None,
        help="the model (default file:///var/lib/cascade/models/tiny-llama; its profile "
        "must be --profile)",
    )
    d.add_argument(
        "--rate-mbit",
        type=int,
        default=6,
        help="multicast.rateMbit per sender (default 6: ~10 s for tiny-llama)",
    )
    d.add_argument("--blocks", type=int, default=4, help="multicast.blocks, <= layers (default 4)")
    d.add_argument(
        "--host-copies",
        type=int,
        default=1,
        help="spec.hostCopies: sources beside the serving instance; with k sources a live "
        "plan's shifted chains cover the model after about 1/k of the transfer (default 1)",
    )
    d.add_argument(
        "--ttft-slo-s", type=float, default=5.0, help="interactive TTFT SLO, s (default 5)"
    )
    d.add_argument(
        "--queue-order",
        choices=["OnTimeFirst", "FIFO"],
        default="OnTimeFirst",
        help="the gateway's slo.queueOrder (default OnTimeFirst; FIFO: the P99 then follows "
        "when capacity arrives instead of the late requests' wait behind the on-time ones)",
    )
    w = ap.add_argument_group("load")
    w.add_argument(
        "--warmup-s", type=float, default=30.0, help="steady load before the burst, s (default 30)"
    )
    w.add_argument(
        "--warmup-x", type=float, default=0.5, help="its demand, instances of one (default 0.5)"
    )
    w.add_argument(
        "--burst-s", type=float, default=60.0, help="the burst window's length, s (default 60)"
    )
    w.add_argument(
        "--burst-x", type=float, default=3.0, help="its demand, instances of one (default 3)"
    )
    w.add_argument(
        "--burst-start", type=float, default=None,
        help="its start, trace seconds (default: the trace's busiest --burst-s window)",
    )  # fmt: skip
    w.add_argument(
        "--context-scale",
        type=float,
        default=0.1,
        help="prompt = round(x ContextTokens), default 0.1",
    )
    w.add_argument(
        "--output-scale",
        type=float,
        default=1.0,
        help="output = round(x GeneratedTokens), default 1",
    )
    w.add_argument("--max-prompt-tokens", type=int, default=512, help="(default 512)")
    w.add_argument("--max-output-tokens", type=int, default=256, help="(default 256)")
    w.add_argument(
        "--batch-share",
        type=float,
        default=0.0,
        help="share sent as batch (default 0: all interactive)",
    )
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--timeout-s", type=float, default=300.0, help="per request (default 300)")
    w.add_argument(
        "--probe-period-s",
        type=float,
        default=0.5,
        help="worker and plan sampling, s (default 0.5)",
    )
    ap.set_defaults(func=_burst)


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    from cascade_bench.burst.modes import BASE_SPEC

    spec = copy.deepcopy(BASE_SPEC)
    if args.model_uri:
        spec["model"]["uri"] = args.model_uri
    spec["multicast"].update(rateMbit=args.rate_mbit, blocks=args.blocks)
    spec["hostCopies"] = args.host_copies
    spec["slo"]["interactive"]["ttftMs"] = round(args.ttft_slo_s * 1000)
    spec["slo"]["queueOrder"] = args.queue_order
    return spec


def _burst(args: argparse.Namespace) -> int:
    from cascade_bench.burst.modes import MODES
    from cascade_bench.burst.plot import plot
    from cascade_bench.burst.report import table
    from cascade_bench.burst.run import BurstConfig, dry_run, run
    from cascade_bench.burst.workload import Shape
    from cascade_bench.replay.scale import Scaling

    cfg = from_args(
        BurstConfig,
        args,
        scaling=from_args(Scaling, args, batch_fraction=args.batch_share),
        shape=Shape(args.warmup_s, args.burst_s, args.warmup_x, args.burst_x, args.burst_start),
        base_spec=_spec(args),
        modes=args.modes or MODES,
        period_s=args.probe_period_s,
    )
    doc = dry_run(cfg, say) if args.dry_run else run(cfg, say)
    return report(doc, table, args.out, args.plot if doc["modes"] else None, plot)
