"""`cascade bench autoscale`: Cascade's autoscaler vs fixed-at-max, KPA and fixed-at-min
on the local cluster, and the simulator's prediction (issue 10 §7). Registered by
`bench.add_parser`; the work is in `cascade_bench.autoscale` (imported when it runs)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cascade_cli.bench_json import names, report, say, subset, write_json
from cascade_protocol.cli_args import from_args


def _runs(text: str) -> tuple[str, ...]:
    from cascade_bench.autoscale.manifest import ALL_RUNS

    return subset(text, ALL_RUNS, "runs")


def _picks(text: str) -> tuple[str, ...]:
    from cascade_bench.autoscale.windows import PICKS, TUNING

    return subset(text, (*PICKS, TUNING), "windows")


def add(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ap = cmds.add_parser(
        "autoscale",
        help="Cascade's autoscaler vs fixed max, KPA and fixed min on a trace window",
        description="Replay one trace window, scaled from a capacity profile so its busiest "
        "minute needs maxReplicas instances at --peak-utilization of their speed, through "
        "the gateway of a ModelDeployment owned in turn by Cascade's autoscaler, fixed at "
        "maxReplicas, a KPA-style concurrency loop, and fixed at minReplicas; then simulate "
        "the same. Prints a table; --json and --png write the document and the figure. "
        "Uses a running `cascade dev` cluster that fits, or brings one up and down.",
    )
    ap.add_argument(
        "--trace", type=Path, required=True, help="CSV: TIMESTAMP,ContextTokens,GeneratedTokens"
    )
    ap.add_argument(
        "--profile",
        type=Path,
        required=True,
        help="capacity profile JSON (measured on the cluster and written there "
        "when the file does not exist)",
    )
    ap.add_argument(
        "-f",
        "--file",
        type=Path,
        default=None,
        help="ModelDeployment YAML (default: the bench's, see bench/README.md)",
    )
    ap.add_argument("--runs", type=_runs, default=None, help="subset, e.g. cascade,fixed_max")
    ap.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    ap.add_argument("--png", type=Path, default=None, metavar="OUT.png")
    ap.add_argument("--per-request", action="store_true", help="one JSON row per request")
    e = ap.add_argument_group("evaluation set (instead of one window; one document for all)")
    e.add_argument(
        "--windows",
        type=_picks,
        default=(),
        help="trace windows of --duration by rule: a subset of busiest,median,quietest; "
        "tuning: every other whole window (choose knobs there, report on the rest)",
    )
    e.add_argument(
        "--synthetic",
        type=names,
        default=(),
        help="synthetic traces, lengths from --trace: poisson, gamma:CV (e.g. gamma:2)",
    )
    e.add_argument(
        "--synthetic-dir",
        type=Path,
        default=None,
        help="where they are written (default: beside --json)",
    )
    ap.add_argument("--dry-run", action="store_true", help="no cluster: load + simulation")
    c = ap.add_argument_group("cluster")
    c.add_argument("--nodes", type=int, default=8)
    c.add_argument("--node-cpu", type=float, default=0.2, help="cores per node (quota)")
    c.add_argument("--state-dir", type=Path, default=None, help="dev cluster state dir")
    c.add_argument("--ready-timeout-s", type=float, default=300.0)
    w = ap.add_argument_group("window, rate, tokens, classes (as cascade bench replay)")
    w.add_argument("--window-start", "--start-s", type=float, default=480.0, help="trace s")
    w.add_argument("--duration", "--duration-s", type=float, default=480.0, help="trace s")
    w.add_argument(
        "--peak-utilization",
        type=float,
        default=0.35,
        help="busiest minute = maxReplicas x this at full speed",
    )
    w.add_argument("--rate-scale", type=float, default=None, help="K copies instead")
    w.add_argument("--context-scale", type=float, default=0.1)
    w.add_argument("--output-scale", type=float, default=1.0)
    w.add_argument("--max-prompt-tokens", type=int, default=512)
    w.add_argument("--max-output-tokens", type=int, default=256)
    w.add_argument("--batch-share", "--batch-fraction", type=float, default=0.2)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--timeout-s", type=float, default=600.0, help="per request")
    k = ap.add_argument_group("baselines and simulator")
    k.add_argument("--kpa-target", type=float, default=None, help="(0.7 x maxBatchSize)")
    k.add_argument("--kpa-window-s", type=float, default=60.0)
    k.add_argument(
        "--time-to-ready",
        type=float,
        default=None,
        help="simulator (default: measured in the runs)",
    )
    ap.set_defaults(func=_autoscale)


def _spec(path: Path | None) -> dict[str, object]:
    from cascade_bench.autoscale import manifest

    if path is None:
        return dict(manifest.BASE_SPEC)
    import yaml

    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    for d in docs:
        if d.get("kind") == "ModelDeployment":
            return manifest.from_document(d)
    raise ValueError(f"{path}: no ModelDeployment")


def _autoscale(args: argparse.Namespace) -> int:
    from cascade_bench.autoscale import manifest
    from cascade_bench.autoscale.report import plot, table
    from cascade_bench.autoscale.run import AutoscaleConfig, dry_run, run
    from cascade_bench.replay.scale import Scaling

    scaling = from_args(
        Scaling,
        args,
        start_s=args.window_start,
        duration_s=args.duration,
        batch_fraction=args.batch_share,
    )
    cfg = from_args(
        AutoscaleConfig,
        args,
        scaling=scaling,
        base_spec=_spec(args.file),
        runs=args.runs or manifest.RUNS,
        time_to_ready_s=args.time_to_ready,
    )
    if args.windows or args.synthetic:
        return _evaluate(args, cfg)
    doc = dry_run(cfg, say) if args.dry_run else run(cfg, say)
    return report(doc, table, args.json, args.png, plot)


def _evaluate(args: argparse.Namespace, cfg: Any) -> int:
    """Every case of the evaluation set through the same comparison; a PNG per case."""
    from dataclasses import replace

    from cascade_bench.autoscale import evaluation as ev
    from cascade_bench.autoscale.report import plot, table
    from cascade_bench.autoscale.run import dry_run, run

    out_dir = args.synthetic_dir or (args.json.parent if args.json else Path("."))
    cases = ev.window_cases(args.trace, args.duration, args.windows)
    cases += ev.synthetic_cases(args.synthetic, args.trace, args.duration, args.seed, out_dir)

    def compare(case: ev.Case) -> dict[str, Any]:
        say(f"case {case.name}: {case.rule}")
        scaling = replace(cfg.scaling, start_s=case.start_s, duration_s=case.duration_s)
        one = replace(cfg, trace=case.trace, scaling=scaling)
        doc = dry_run(one, say) if args.dry_run else run(one, say)
        print(f"\n== {case.name} ==\n{table(doc)}")
        if args.png is not None:
            path = args.png.with_name(f"{args.png.stem}-{ev.file_name(case.name)}.png")
            plot(doc, path)
            say(f"wrote {path}")
        return doc

    doc = ev.evaluate(cases, compare)
    print("\n" + ev.overall_table(doc))
    write_json(args.json, doc)
    return 0
