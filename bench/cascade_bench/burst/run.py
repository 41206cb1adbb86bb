"""One `cascade bench burst`: the load, then each mode on the cluster, one after another.

1. A dev cluster that fits (`autoscale.cluster.dev_cluster`: a running one is used and
   left running; with none the bench brings one up and takes it down), the capacity
   profile (a file: `cascade bench capacity` makes one), the load (`workload.build`).
2. Per mode, in a fresh namespace with its own operator (`bench_namespace`): create the
   mode's ModelDeployment (`modes.mode_spec`), wait until its instances are Ready and
   the gateway routes to them, then replay the load open-loop through the gateway (the
   replay bench's client) with the probe beside it; at the burst's start write
   replicas N through /scale (the scale decision; not for `prescaled`); when every
   request has ended, delete the deployment and wait until its pods are gone.
3. The document (`report.document`): metrics per mode, comparisons, goals.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_bench.autoscale.cluster import Bench, bench_namespace, dev_cluster
from cascade_bench.autoscale.manifest import body
from cascade_bench.burst import metrics, modes, report, workload
from cascade_bench.burst.probes import Probe, worker_pods
from cascade_bench.replay.client import ClientOptions, ReplayResult, replay
from cascade_bench.replay.scale import Planned, Scaling
from cascade_bench.replay.trace import load_trace
from cascade_dev.paths import StatePaths, default_state_dir
from cascade_sim.profile import CapacityProfile, from_document

Say = Callable[[str], None]


@dataclass(frozen=True)
class BurstConfig:
    trace: Path
    profile: Path
    scaling: Scaling = field(default_factory=lambda: Scaling(batch_fraction=0.0))
    shape: workload.Shape = field(default_factory=workload.Shape)
    base_spec: Mapping[str, Any] = field(default_factory=lambda: dict(modes.BASE_SPEC))
    modes: tuple[str, ...] = modes.MODES
    scale_to: int = 4  # N
    nodes: int = 4
    node_cpu: float | None = 0.2  # None: use a running cluster whatever its quota
    gpus_per_instance: int | None = None  # None: a whole node's GPUs (one instance per node)
    timeout_s: float = 300.0  # per request
    ready_timeout_s: float = 300.0
    period_s: float = 0.5  # the probe's
    state_dir: Path | None = None
    per_request: bool = False


def read_profile(cfg: BurstConfig, say: Say) -> CapacityProfile:
    if not cfg.profile.exists():
        raise ValueError(
            f"{cfg.profile}: no capacity profile; measure one on this cluster with "
            "`cascade bench capacity --json FILE` (at the quota the burst runs at)"
        )
    profile = from_document(json.loads(cfg.profile.read_text()))
    if cfg.node_cpu is not None and profile.node_cpu != cfg.node_cpu:
        raise ValueError(
            f"{cfg.profile} was measured at {profile.node_cpu} core per node, the burst runs "
            f"at {cfg.node_cpu:g}: measure one at this quota"
        )
    if cfg.node_cpu is None:
        say(f"profile at {profile.node_cpu} core, cluster quota not checked (--node-cpu none)")
    return profile


def build_load(cfg: BurstConfig, profile: CapacityProfile) -> workload.BurstLoad:
    spec = modes.mode_spec(cfg.base_spec, "pipelines", cfg.scale_to)
    max_batch = int(spec.get("engine", {}).get("maxBatchSize", 64))
    trace = load_trace(cfg.trace)
    return workload.build(trace, cfg.scaling, cfg.shape, profile, modes.itl_slo_s(spec), max_batch)


async def _drive(
    plan: Sequence[Planned],
    opts: ClientOptions,
    t0: float,
    at_s: float,
    scale: Callable[[], None] | None,
) -> tuple[ReplayResult, float, float | None]:
    """The replay, and the scale decision at `at_s` beside it: (result, decision time,
    time the /scale write returned)."""
    task = asyncio.create_task(replay(plan, opts))
    await asyncio.sleep(max(0.0, at_s - (time.perf_counter() - t0)))
    decided = time.perf_counter() - t0
    acked = None
    if scale is not None:
        await asyncio.to_thread(scale)
        acked = time.perf_counter() - t0
    return await task, decided, acked


def one_mode(
    b: Bench, mode: str, cfg: BurstConfig, load: workload.BurstLoad, gpus: int, say: Say
) -> metrics.ModeRaw:
    spec = modes.mode_spec(cfg.base_spec, mode, cfg.scale_to, gpus)
    b.create(body(b.ns, mode, spec))
    try:
        say(f"{mode}: waiting for {spec['replicas']} instance(s)")
        url = b.wait_ready(mode, int(spec["replicas"]), cfg.ready_timeout_s)
        copies = b.wait_host_copies(mode, cfg.ready_timeout_s)  # a source like the instance
        say(f"{mode}: {copies} host copies hold the model")
        originals = sorted(p.metadata.name for p in worker_pods(b, mode))
        model = str(spec["model"].get("servedName") or "")
        opts = ClientOptions(url=url, model=model, seed=cfg.scaling.seed, timeout_s=cfg.timeout_s)
        scaled = mode in modes.SCALED
        scale = (lambda: b.scale(mode, cfg.scale_to)) if scaled else None
        say(f"{mode}: {len(load.planned)} requests through {url}, burst at {load.burst_at_s:g} s")
        t0 = time.perf_counter()
        probe = Probe(b, mode, t0, url, cfg.period_s)
        probe.start()
        try:
            result, decided, acked = asyncio.run(
                _drive(load.planned, opts, t0, load.burst_at_s, scale)
            )
        finally:
            probe.stop()
        done = sum(1 for r in result.records if r.ok)
        say(f"{mode}: {done}/{len(result.records)} completed in {result.wall_s:.0f} s")
    finally:
        b.delete(mode)
    return metrics.ModeRaw(
        spec,
        result.records,
        result.wall_s,
        probe.rounds,
        originals,
        decided,
        scaled,
        acked,
        probe.wall0,
        probe.errors,
    )


def model_bytes(uri: str) -> int | None:
    """Weights on disk (the *.safetensors files) of a file:// model; None elsewhere."""
    path = Path(uri.removeprefix("file://"))
    if not uri.startswith("file://") or not path.is_dir():
        return None
    return sum(f.stat().st_size for f in path.glob("*.safetensors"))


def choices(cfg: BurstConfig, profile: CapacityProfile, cluster: dict[str, Any]) -> dict[str, Any]:
    uri = str(cfg.base_spec["model"]["uri"])
    size = model_bytes(uri)
    spec = modes.mode_spec(cfg.base_spec, "pipelines", cfg.scale_to)
    return {
        "cluster": cluster,
        "scale_to": cfg.scale_to,
        "model_uri": uri,
        "model_bytes": size,
        "multicast": spec.get("multicast", {}),
        "transfer_bound_s": None if size is None else modes.transfer_bound_s(spec, size),
        "profile": {
            "file": str(cfg.profile),
            "model": profile.model,
            "node_cpu": profile.node_cpu,
            "curve": [[p.batch, p.tokens_per_s] for p in profile.points],
            "prefill_tokens_per_s": profile.prefill_tokens_per_s,
        },
        "base_spec": dict(cfg.base_spec),
        "modes": list(cfg.modes),
        "timeout_s": cfg.timeout_s,
    }


def judge(cfg: BurstConfig, profile: CapacityProfile, load: workload.BurstLoad) -> metrics.Judge:
    spec = modes.mode_spec(cfg.base_spec, "pipelines", cfg.scale_to)
    return metrics.Judge(
        burst_t=(load.burst_at_s, load.burst_end_s),
        ttft_slo_s=modes.ttft_slo_s(spec),
        step_s=profile.step_s(int(load.doc["demand_batch"])),
        period_s=cfg.period_s,
    )


def run(cfg: BurstConfig, say: Say = print) -> dict[str, Any]:
    began = time.monotonic()
    paths = StatePaths(cfg.state_dir or default_state_dir())
    raw: dict[str, metrics.ModeRaw] = {}
    with dev_cluster(paths, cfg.nodes, cfg.node_cpu) as brought_up:
        profile = read_profile(cfg, say)
        load = build_load(cfg, profile)
        say(report.load_line(load.doc))
        gpus = cfg.gpus_per_instance
        for mode in cfg.modes:
            with bench_namespace(paths.kubeconfig) as b:
                if gpus is None:
                    gpus = b.nodes().gpus
                    if cfg.scale_to > cfg.nodes:
                        raise ValueError(f"N = {cfg.scale_to} > {cfg.nodes} nodes: one per node")
                raw[mode] = one_mode(b, mode, cfg, load, gpus, say)
    cluster = {
        "nodes": cfg.nodes,
        "node_cpu": cfg.node_cpu,
        "gpus_per_instance": gpus,
        "brought_up": brought_up,
    }
    return report.document(
        choices(cfg, profile, cluster),
        load.doc,
        raw,
        judge(cfg, profile, load),
        cfg.per_request,
        time.monotonic() - began,
    )


def dry_run(cfg: BurstConfig, say: Say = print) -> dict[str, Any]:
    """No cluster: the load and the choices."""
    began = time.monotonic()
    profile = read_profile(cfg, say)
    load = build_load(cfg, profile)
    cluster = {"nodes": cfg.nodes, "node_cpu": cfg.node_cpu, "dry_run": True}
    return report.document(
        choices(cfg, profile, cluster),
        load.doc,
        {},
        judge(cfg, profile, load),
        False,
        time.monotonic() - began,
    )
