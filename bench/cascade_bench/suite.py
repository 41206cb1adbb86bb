"""`cascade bench multicast`: every method, one fabric, one model, one invocation.

Order of work: make/pack the model and measure loopback (host only), then on the
cluster's fabric take one pod per node, check one shaped link, and run the methods
`repeat` times each (interleaved, so drift hits all of them alike). Whatever happens,
participants are killed and pods detached (see procs.py, pods.py).
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

import cascade_bench.methods as methods
from cascade_bench import link as linkcheck
from cascade_bench.bound import bound_seconds
from cascade_bench.cluster import Want, fabric_cluster
from cascade_bench.model import ModelInfo, default_model_dir, ensure_model, inspect_model
from cascade_bench.nodeio import write_blocks
from cascade_bench.params import Params, run_timeout
from cascade_bench.pods import BenchPod, bench_pods
from cascade_bench.results import RunSummary, summarize_methods
from cascade_bench.steps import StepDir, run_step
from cascade_dev.fabric import Fabric
from cascade_dev.paths import StatePaths, default_state_dir


def _log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _step(p: Params, name: str) -> StepDir:
    root = p.workdir / name
    shutil.rmtree(root, ignore_errors=True)
    return StepDir(root).make()


def _link(p: Params, pods: list[BenchPod], model: ModelInfo) -> dict[str, Any]:
    """One transfer between pods on different leaves (both NICs and the spine shaped)."""
    src, dst = pods[0], pods[-1]
    nbytes = int(p.link_mb * 1_000_000)
    entries: dict[str, dict[str, Any]] = {}
    for kind in ("socket", "ucxx"):
        step = _step(p, f"link-{kind}")
        launches = linkcheck.link_launches(step, kind, src, dst, nbytes)
        run = run_step(step, launches, [dst.name], 1, p.ready_timeout_s, 120, p.quiet_wait_s)
        entries[kind] = linkcheck.link_entry(run, nbytes, p.nic_mbit)
    if methods.cascade_available():
        step = _step(p, "link-cascade")
        launches = methods.cascade_launches(step, "chain", [src], [dst], model, p, None, 120)
        run = run_step(
            step, launches, [dst.name], len(model.blocks), p.ready_timeout_s, 120, p.quiet_wait_s
        )
        entries["cascade"] = linkcheck.link_entry(run, model.total_bytes, p.nic_mbit)
    doc = linkcheck.link_summary(entries, nbytes, p.nic_mbit)
    doc["pair"] = [src.node, dst.node]
    return doc


def _variants(p: Params) -> list[tuple[str, str, int | None]]:
    """(result key, method, chunk KiB): Cascade methods once per requested chunk size."""
    out: list[tuple[str, str, int | None]] = []
    for m in p.methods:
        if m == "gloo" or not p.chunk_kb:
            out.append((m, m, None))
        else:
            out += [(m if i == 0 else f"{m}@{kb}K", m, kb) for i, kb in enumerate(p.chunk_kb)]
    return out


def _run_method(
    p: Params, key: str, method: str, chunk_kb: int | None, rep: int,
    pods: list[BenchPod], model: ModelInfo, blocks_json: Path, bound_s: float,
) -> RunSummary:  # fmt: skip
    sources, receivers = pods[: p.k], pods[p.k :]
    step = _step(p, f"{key}-r{rep}")
    timeout = run_timeout(bound_s, len(receivers))
    if method == "gloo":
        from cascade_bench.gloo import gloo_launches

        launches = gloo_launches(step, sources[0], receivers, blocks_json, model.path, timeout)
    elif methods.cascade_available():
        launches = methods.cascade_launches(
            step, method, sources, receivers, model, p, chunk_kb, timeout
        )
    else:
        return RunSummary(None, None, {}, 0, error="cascade_worker.multicast.node not found")
    _log(f"{key} (run {rep + 1}/{p.repeat}): {len(launches)} participants")
    t0 = time.monotonic()
    names = [r.name for r in receivers]
    run = run_step(
        step, launches, names, len(model.blocks), p.ready_timeout_s, timeout, p.quiet_wait_s
    )
    _log(f"{key}: completion {run.completion_s} s (wall {time.monotonic() - t0:.1f} s)")
    return run


def run_suite(p: Params) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON document and the method summaries."""
    p.workdir.mkdir(parents=True, exist_ok=True)
    model_path = p.model_dir or default_model_dir(p.workdir / "models", p.model_mb)
    model = inspect_model(ensure_model(model_path, p.model_mb), p.blocks)
    blocks_json = p.workdir / "blocks.json"
    write_blocks(blocks_json, model.blocks)
    bound_s = bound_seconds(model.total_bytes, p.nic_mbit)
    _log(f"model {model.total_bytes / 1e6:.1f} MB in {p.blocks} blocks; M/B = {bound_s:.2f} s")
    loopback = linkcheck.loopback(int(p.loopback_mb * 1_000_000)) if p.loopback_mb > 0 else {}
    paths = StatePaths(p.state_dir or default_state_dir())
    want = Want(p.nodes, p.nic_mbit, p.spine, p.nodes_per_leaf, p.mtu)
    runs: dict[str, list[RunSummary]] = {key: [] for key, _, _ in _variants(p)}
    with fabric_cluster(paths, want, p.wait_cluster_s) as plan:
        fabric = Fabric.load(paths.root)
        nodes = [n.name for n in plan.nodes[: p.nodes]]
        with bench_pods(fabric, nodes) as pods:
            fabric_doc = methods.fabric_doc(plan, pods)
            link = _link(p, pods, model) if p.link_mb > 0 else {}
            for rep in range(p.repeat):
                for key, method, kb in _variants(p):
                    runs[key].append(
                        _run_method(p, key, method, kb, rep, pods, model, blocks_json, bound_s)
                    )
    summaries = summarize_methods(runs, bound_s)
    doc: dict[str, Any] = {
        "bound_s": bound_s,
        "results": {k: s.to_json() for k, s in summaries.items()},
        "params": {**p.to_json(), "model_bytes": model.total_bytes, "sources": p.k},
        "model": {"path": str(model.path), "digest": model.digest, "bytes": model.total_bytes},
        "fabric": fabric_doc,
        "link": link,
        "loopback": loopback,
    }
    return doc, summaries
