"""`cascade simulate`: the autoscaling policies over a trace, in seconds, without a cluster.

Reads the trace (the replay's reader and scaling, so `--start-s`, `--speedup`, token
scaling and `--batch-fraction` mean what they mean to `cascade bench replay`), the
ModelDeployment (bounds, behavior, Θ/δ, SLOs, engine max batch) and a capacity profile
(`cascade bench capacity --json`), runs `cascade_sim` once per policy, and prints a
table; `--json` writes the documents, `--png` a timeline. The simulation itself is pure
(`cascade_sim`); this module only reads files and reports.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from cascade_cli import replay_flags
from cascade_cli.bench_json import write_json
from cascade_protocol.cli_args import from_args
from cascade_sim import policies
from cascade_sim import workload as wl
from cascade_sim.config import BATCH, INTERACTIVE, Deployment, SimConfig, Slo, from_spec
from cascade_sim.profile import CapacityProfile, from_document

POLICIES = policies.NAMES


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sp = sub.add_parser(
        "simulate",
        help="run the autoscaling policies over a trace in a discrete-event model",
        description="Replay a trace (TIMESTAMP,ContextTokens,GeneratedTokens) through a "
        "model of the gateway, the instances (capacity profile, time to ready) and the "
        "same autoscaling policies the operator and workers run; print per-class SLO "
        "attainment, P99 TTFT, instance-seconds and scaling events. See docs/simulate.md.",
    )
    sp.add_argument("--trace", type=Path, required=True, help="trace CSV")
    sp.add_argument("-f", "--file", type=Path, required=True, help="ModelDeployment YAML")
    sp.add_argument("--profile", type=Path, required=True, help="capacity profile JSON")
    sp.add_argument("--policy", choices=(*POLICIES, "all"), default="cascade")
    sp.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    sp.add_argument("--json-timeline", action="store_true", help="add the per-tick timeline")
    sp.add_argument("--png", type=Path, default=None, metavar="OUT.png", help="timeline plot")
    w = sp.add_argument_group("window and rate (as cascade bench replay)")
    w.add_argument("--start-s", "--start", type=float, default=0.0, help="trace seconds")
    w.add_argument("--duration-s", "--duration", type=float, default=None, help="(default: all)")
    w.add_argument("--speedup", type=float, default=1.0, help="time compression (replay's)")
    w.add_argument("--max-requests", type=int, default=None, help="first N of the window")
    w.add_argument("--rate-scale", type=float, default=1.0, help="K copies of each request")
    w.add_argument("--peak-instances", type=float, default=None, metavar="N",
                   help="scale so the busiest minute needs about N instances")  # fmt: skip
    w.add_argument("--peak-via", choices=("rate-scale", "speedup"), default="rate-scale")
    t = sp.add_argument_group("tokens and classes (as cascade bench replay)")
    replay_flags.add_tokens(t)
    t.add_argument("--batch-fraction", "--batch-share", type=float, default=0.2)
    t.add_argument("--seed", type=int, default=0, help="classes and copies")
    s = sp.add_argument_group("SLOs (default: the ModelDeployment's spec.slo)")
    s.add_argument("--interactive-ttft-s", type=float, default=None)
    s.add_argument("--interactive-itl-ms", type=float, default=None)
    s.add_argument("--batch-ttft-s", type=float, default=None)
    s.add_argument("--batch-itl-ms", type=float, default=None)
    m = sp.add_argument_group("model")
    m.add_argument("--time-to-ready", type=float, default=20.0, metavar="S",
                   help="a ScalePlan's predicted time + the engine start")  # fmt: skip
    m.add_argument("--tick-s", type=float, default=2.0, help="global policy period")
    m.add_argument("--local-tick-s", type=float, default=0.5, help="local autoscaler period")
    m.add_argument("--local", choices=("auto", "adaptive", "fixed"), default="auto")
    m.add_argument("--routing", choices=("gateway", "pack"), default="gateway")
    m.add_argument("--slack", type=int, default=2, help="gateway --backend-slack")
    m.add_argument("--prefill-tokens-per-s", type=float, default=None, help="(profile peak)")
    m.add_argument("--interactive-queue", type=int, default=256)
    m.add_argument("--batch-queue", type=int, default=4096)
    m.add_argument("--client-timeout-s", type=float, default=600.0)
    m.add_argument("--kpa-target", type=float, default=None, help="(0.7 x max batch)")
    sp.set_defaults(func=_simulate)


def read_deployment(path: Path) -> Deployment:
    """The first ModelDeployment in a YAML file, validated as the API server would."""
    import yaml

    from cascade_api.invariants import violations
    from cascade_api.modeldeployment import ModelDeploymentSpec

    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    md = next((d for d in docs if d.get("kind") == "ModelDeployment"), None)
    if md is None or not isinstance(md.get("spec"), dict):
        raise ValueError(f"{path}: no ModelDeployment with a spec")
    spec = ModelDeploymentSpec.model_validate(md["spec"])
    bad = violations(spec)
    if bad:
        raise ValueError(f"{path}: " + "; ".join(v.message for v in bad))
    return from_spec(spec)


def with_slos(args: argparse.Namespace, dep: Deployment) -> Deployment:
    """The deployment's SLOs, with the flags that were given instead."""

    def one(cls: str, ttft: float | None, itl_ms: float | None) -> Slo:
        base = dep.slos[cls]
        itl = base.itl_s if itl_ms is None else itl_ms / 1e3
        return Slo(base.ttft_s if ttft is None else ttft, itl)

    return replace(
        dep,
        slos={
            INTERACTIVE: one(INTERACTIVE, args.interactive_ttft_s, args.interactive_itl_ms),
            BATCH: one(BATCH, args.batch_ttft_s, args.batch_itl_ms),
        },
    )


def workload(
    args: argparse.Namespace, dep: Deployment, profile: CapacityProfile, prefill: float
) -> tuple[list[wl.Arrival], dict[str, Any]]:
    """The arrivals and the document that says how they came from the trace."""
    from cascade_bench.replay.scale import Scaling, describe, schedule
    from cascade_bench.replay.trace import load_trace

    trace = load_trace(args.trace)
    scaling = replay_flags.scaling(args)

    def arrivals(s: Scaling) -> list[wl.Arrival]:
        return [
            wl.Arrival(p.index, p.at_s, p.prompt_tokens, p.output_tokens, p.request_class == BATCH)
            for p in schedule(trace, s)
        ]

    got = arrivals(scaling)
    rate_scale = args.rate_scale
    itl = dep.slos[INTERACTIVE].itl_s
    batch = profile.batch_for_itl(itl, dep.engine_max_batch) if itl else dep.engine_max_batch
    if args.peak_instances is not None:
        if args.peak_via == "speedup":
            speedup = wl.speedup_for_peak(got, args.peak_instances, profile, batch, prefill)
            scaling = replace(scaling, speedup=args.speedup * speedup)
            got = arrivals(scaling)
        else:
            rate_scale = wl.rate_scale_for_peak(got, args.peak_instances, profile, batch, prefill)
    if rate_scale != 1.0:
        got = wl.replicate(got, rate_scale, args.seed, args.batch_fraction)
    doc = describe(trace, scaling, schedule(trace, scaling))
    doc.update(
        trace=str(args.trace),
        rate_scale=rate_scale,
        simulated_requests=len(got),
        simulated_batch=sum(1 for a in got if a.batch),
        peak_instances_demand=wl.peak_demand(got, profile, batch, prefill),
        demand_batch=batch,
    )
    return got, doc


def _simulate(args: argparse.Namespace) -> int:
    from cascade_cli.simulate_report import table
    from cascade_sim.metrics import summarize
    from cascade_sim.sim import simulate

    dep = with_slos(args, read_deployment(args.file))
    profile = from_document(json.loads(args.profile.read_text()))
    cfg = from_args(SimConfig, args, time_to_ready_s=args.time_to_ready)
    prefill = cfg.prefill_rate(profile)
    arrivals, load = workload(args, dep, profile, prefill)
    names = POLICIES if args.policy == "all" else (args.policy,)
    docs: dict[str, dict[str, Any]] = {}
    results = {}
    for name in names:
        began = time.perf_counter()
        result = simulate(arrivals, dep, profile, policies.make(name, dep, cfg.kpa_target), cfg)
        docs[name] = summarize(result, dep.slos, timeline=args.json_timeline)
        docs[name]["wall_s"] = time.perf_counter() - began
        results[name] = result
    print(table(docs, load, dep, profile, cfg))
    doc: dict[str, Any] = docs[names[0]] if len(names) == 1 else {"policies": docs}
    doc = {**doc, "workload": load, "config": _config(cfg, dep, profile)}
    write_json(args.json, doc)
    if args.png is not None:
        from cascade_cli.simulate_report import plot

        plot(results, dep.slos, args.png)
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def _config(cfg: SimConfig, dep: Deployment, profile: CapacityProfile) -> dict[str, Any]:
    from dataclasses import asdict

    return {
        "sim": asdict(cfg),
        "min_replicas": dep.spec.min_replicas,
        "max_replicas": dep.max_replicas,
        "replicas": dep.replicas,
        "owner": dep.spec.owner,
        "theta": dep.spec.theta,
        "delta": dep.spec.delta,
        "engine_max_batch": dep.engine_max_batch,
        "adaptive_batch": dep.adaptive_batch,
        "slos": {c: {"ttft_s": s.ttft_s, "itl_s": s.itl_s} for c, s in dep.slos.items()},
        "profile": {"model": profile.model, "node_cpu": profile.node_cpu},
    }
