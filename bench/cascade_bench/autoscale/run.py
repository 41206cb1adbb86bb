"""One `cascade bench autoscale`: the load, the four runs on the cluster, the prediction.

1. A dev cluster that fits (`cluster.dev_cluster`), a capacity profile (the file, or
   measured now with `cascade bench capacity`'s code and written there).
2. The load (`workload.build`): the trace window, scaled so its busiest minute needs
   maxReplicas instances running at `peak_utilization` of the profile's speed.
3. Per run, in a namespace with its own operator: create the run's ModelDeployment
   (`manifest.run_spec`), wait for its instances and a gateway routing to them, replay
   the load open-loop through the gateway (the replay bench's client) while the sampler
   (and for `kpa` the KPA loop) run on threads, delete it and wait for its pods to go.
4. The simulator on the same arrivals (`predict`), then rows, goals and the document.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_bench.autoscale import kpa, manifest, predict, workload
from cascade_bench.autoscale.cluster import Bench, bench_namespace, dev_cluster
from cascade_bench.autoscale.loops import KpaLoop, Sampler
from cascade_bench.autoscale.timeline import median, times_to_ready
from cascade_bench.cpu import host_cpu
from cascade_bench.replay.client import ClientOptions, replay
from cascade_bench.replay.metrics import Slo
from cascade_bench.replay.run import ReplayConfig, result_doc
from cascade_bench.replay.scale import Planned, Scaling
from cascade_bench.replay.trace import load_trace
from cascade_dev.paths import StatePaths, default_state_dir
from cascade_sim.profile import CapacityProfile, from_document

Say = Callable[[str], None]


@dataclass(frozen=True)
class AutoscaleConfig:
    trace: Path
    profile: Path  # read, or measured and written when missing
    scaling: Scaling = field(default_factory=Scaling)
    peak_utilization: float = 0.35
    rate_scale: float | None = None  # given outright instead of the peak rule
    base_spec: Mapping[str, Any] = field(default_factory=lambda: dict(manifest.BASE_SPEC))
    runs: tuple[str, ...] = manifest.RUNS
    nodes: int = 8
    node_cpu: float | None = 0.2
    kpa_target: float | None = None  # None: 0.7 x engine.maxBatchSize
    kpa_window_s: float = 60.0
    time_to_ready_s: float | None = None  # simulator; None: measured
    timeout_s: float = 600.0  # per request (the replay's client timeout)
    ready_timeout_s: float = 300.0
    state_dir: Path | None = None
    per_request: bool = False


def _slos(spec: Mapping[str, Any]) -> dict[str, Slo]:
    dep = manifest.deployment(spec)
    return {c: Slo(s.ttft_s, s.itl_s) for c, s in dep.slos.items()}


def _profile(cfg: AutoscaleConfig, kubeconfig: Path, say: Say) -> CapacityProfile:
    if not cfg.profile.exists():
        from cascade_bench.capacity.run import CapacityConfig
        from cascade_bench.capacity.run import run as measure

        uri = str(cfg.base_spec["model"]["uri"])
        prompt = workload.mean_prompt_tokens(cfg.trace, cfg.scaling)
        say(f"no profile at {cfg.profile}: measuring one at {prompt}-token prompts")
        doc = measure(
            CapacityConfig(
                model_path=Path(uri.removeprefix("file://")),
                kubeconfig=kubeconfig,
                batches=(1, 2, 4, 8, 16, 32, 64),
                prompt_tokens=prompt,
                warmup_s=3.0,
                duration_s=10.0,
            ),
            say,
        )
        cfg.profile.parent.mkdir(parents=True, exist_ok=True)
        cfg.profile.write_text(json.dumps(doc, indent=2) + "\n")
    profile = from_document(json.loads(cfg.profile.read_text()))
    if cfg.node_cpu is not None and profile.node_cpu != cfg.node_cpu:
        raise ValueError(
            f"{cfg.profile} was measured at {profile.node_cpu} core per node, the cluster "
            f"runs {cfg.node_cpu:g}: measure one at this quota (or give a new path)"
        )
    return profile


async def _replay(plan: Sequence[Planned], opts: ClientOptions, say: Say) -> Any:
    done = {"n": 0}

    def tick(_: Any) -> None:
        done["n"] += 1
        if done["n"] % 200 == 0:
            say(f"  {done['n']}/{len(plan)} requests done")

    return await replay(plan, opts, tick)


def one_run(
    b: Bench, run: str, cfg: AutoscaleConfig, load: workload.Load, gpus: int, say: Say
) -> dict[str, Any]:
    """Deploy, replay with the loops beside it, delete; the raw results of one run."""
    spec = manifest.run_spec(cfg.base_spec, run, gpus_per_node=gpus)
    slos = _slos(spec)
    b.delete(run)  # a leftover of an interrupted bench
    deploying = time.perf_counter()
    b.create(manifest.body(b.ns, run, spec))
    try:
        say(f"{run}: waiting for {spec['replicas']} instance(s)")
        url = b.wait_ready(run, int(spec["replicas"]), cfg.ready_timeout_s)
        deploy = (int(spec["replicas"]), time.perf_counter() - deploying)
        model = str(spec["model"].get("servedName") or manifest.md_name(run))
        rcfg = ReplayConfig(
            trace=cfg.trace,
            url=url,
            model=model,
            scaling=cfg.scaling,
            slos=slos,
            timeout_s=cfg.timeout_s,
            progress=False,
            per_request=True,
        )
        opts = ClientOptions(url=url, model=model, seed=cfg.scaling.seed, timeout_s=cfg.timeout_s)
        t0 = time.perf_counter()
        sampler = Sampler(b, run, t0, url)
        loops: list[Any] = [sampler]
        if run == "kpa":
            lo, hi = manifest.bounds(spec)
            target = cfg.kpa_target or 0.7 * int(spec["engine"].get("maxBatchSize", 64))
            loops.append(KpaLoop(b, run, url, kpa.KpaConfig(target, lo, hi, cfg.kpa_window_s), t0))
        busy0 = host_cpu()
        for loop in loops:
            loop.start()
        say(f"{run}: replaying {len(load.planned)} requests through {url}")
        try:
            res = asyncio.run(_replay(load.planned, opts, say))
        finally:
            for loop in loops:
                loop.stop()
        busy1 = host_cpu()
    finally:
        b.delete(run)
    doc = result_doc(rcfg, load_trace(cfg.trace), load.planned, model, res)
    first = sampler.samples[0].t if sampler.samples else 0.0
    created = {u: t for u, t in sampler.first_seen.items() if t > first}
    cores = os.cpu_count() or 1
    dt = busy1[1] - busy0[1]
    return {
        "spec": spec,
        "replay": doc,
        "samples": sampler.samples,
        "time_to_ready_s": times_to_ready(created, sampler.samples),
        "deploy_ready": deploy,  # (replicas, seconds from creation to all routed)
        "nodes_used": len(set(sampler.nodes.values())),
        "pods_seen": len(sampler.first_seen),
        "host_busy_cores": cores * (busy1[0] - busy0[0]) / dt if dt > 0 else None,
        "kpa_decisions": loops[1].decisions if len(loops) > 1 else None,
        "loop_errors": [e for loop in loops for e in loop.errors],
    }


def run(cfg: AutoscaleConfig, say: Say = print) -> dict[str, Any]:
    began = time.monotonic()
    if not 0 < cfg.peak_utilization <= 1:
        raise ValueError("--peak-utilization must be in (0, 1]")
    _, hi = manifest.bounds(cfg.base_spec)
    spec0 = manifest.run_spec(cfg.base_spec, "cascade")
    dep = manifest.deployment(spec0)
    paths = StatePaths(cfg.state_dir or default_state_dir())
    raw: dict[str, dict[str, Any]] = {}
    with dev_cluster(paths, cfg.nodes, cfg.node_cpu) as brought_up:
        profile = _profile(cfg, paths.kubeconfig, say)
        rate = workload.RateChoice(hi * cfg.peak_utilization, cfg.rate_scale)
        itl = dep.slos["interactive"].itl_s
        load = workload.build(cfg.trace, cfg.scaling, rate, profile, itl, dep.engine_max_batch)
        say(
            f"load: {len(load.planned)} requests, rate x{load.doc['rate_scale']:.3f}, busiest "
            f"minute needs {load.doc['peak_instances_demand']:.2f} instances at full speed"
        )
        with bench_namespace(paths.kubeconfig) as b:
            facts = b.nodes()
            if hi > cfg.nodes:
                raise ValueError(f"maxReplicas {hi} > {cfg.nodes} nodes: one instance per node")
            for name in cfg.runs:
                raw[name] = one_run(b, name, cfg, load, facts.gpus, say)
    return assemble(cfg, raw, load, profile, brought_up, facts.gpus, time.monotonic() - began)


def assemble(
    cfg: AutoscaleConfig,
    raw: Mapping[str, Mapping[str, Any]],
    load: workload.Load,
    profile: CapacityProfile,
    brought_up: bool,
    gpus: int,
    wall_s: float,
) -> dict[str, Any]:
    """The bench's document from the raw runs (and the simulator, run here)."""
    from cascade_bench.autoscale import document

    ttr = [t for r in raw.values() for t in r["time_to_ready_s"]]
    deploys = [tuple(r["deploy_ready"]) for r in raw.values() if r.get("deploy_ready")]
    ready_s, source = predict.ready_before_replay(cfg.time_to_ready_s, deploys)
    sims = predict.predict(
        load.arrivals, cfg.base_spec, profile, list(raw), ready_s, cfg.kpa_target
    )
    print(f"simulated {', '.join(sims)} (time to ready {ready_s:.1f} s)", file=sys.stderr)
    return document.build(
        cfg,
        raw,
        load,
        profile,
        sims,
        predict.sim_config(ready_s, source, cfg.kpa_target, median(ttr)),
        {
            "nodes": cfg.nodes,
            "node_cpu": cfg.node_cpu,
            "gpus_per_instance": gpus,
            "brought_up": brought_up,
        },
        wall_s,
    )


def dry_run(cfg: AutoscaleConfig, say: Say = print) -> dict[str, Any]:
    """No cluster: the load and what the simulator predicts for each run."""
    began = time.monotonic()
    if not cfg.profile.exists():
        raise ValueError(f"--dry-run needs a profile: {cfg.profile} does not exist")
    profile = from_document(json.loads(cfg.profile.read_text()))
    _, hi = manifest.bounds(cfg.base_spec)
    dep = manifest.deployment(manifest.run_spec(cfg.base_spec, "cascade"))
    rate = workload.RateChoice(hi * cfg.peak_utilization, cfg.rate_scale)
    itl = dep.slos["interactive"].itl_s
    load = workload.build(cfg.trace, cfg.scaling, rate, profile, itl, dep.engine_max_batch)
    ready_s = cfg.time_to_ready_s or predict.DEFAULT_TIME_TO_READY_S
    source = "given (--time-to-ready)" if cfg.time_to_ready_s else "default (dry run)"
    sims = predict.predict(load.arrivals, cfg.base_spec, profile, cfg.runs, ready_s, cfg.kpa_target)
    from cascade_bench.autoscale import document

    cluster = {
        "nodes": cfg.nodes,
        "node_cpu": cfg.node_cpu,
        "gpus_per_instance": None,
        "brought_up": False,
        "dry_run": True,
    }
    return document.build(
        cfg,
        {},
        load,
        profile,
        sims,
        predict.sim_config(ready_s, source, cfg.kpa_target),
        cluster,
        time.monotonic() - began,
    )
