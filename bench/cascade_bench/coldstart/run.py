"""`cascade bench coldstart`'s I/O: deploy each mode, decide, time the first token.

Per mode and case, in a fresh namespace with its own operator: create the deployment,
wait for its starting point (instances Ready, host copies holding the model), write the
scale through /scale (the decision: t = 0), poll every 0.1 s for the new pod to be
Ready, ask it for one token straight on its worker (the gateway's routing is not what is
measured), then read its start-up from status.instances[] and its materialization from
its own status (profile, restore and saved seconds). The pool mode also scales
1 -> 6 -> 0 and at each reads the resident memory of the host-copy and worker pods from
their processes (`memory`), beside the blocks the host copies report holding.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_api import constants as c
from cascade_bench.autoscale.cluster import (
    COMPONENT,
    Bench,
    bench_namespace,
    dev_cluster,
    pod_ready,
)
from cascade_bench.autoscale.manifest import body, md_name
from cascade_bench.burst.probes import worker_pods
from cascade_bench.coldstart import memory, modes, report
from cascade_bench.worker_auth import authorize, headers_for
from cascade_dev.paths import StatePaths, default_state_dir
from cascade_protocol.status import STATUS_PATH

Say = Callable[[str], None]
POLL_S = 0.1


@dataclass(frozen=True)
class ColdConfig:
    model_dir: Path
    layers: int = 8
    hidden: int = 768
    nodes: int = 4
    cases: tuple[str, ...] = modes.CASES
    modes: tuple[str, ...] = modes.MODES
    timeout_s: float = 300.0
    state_dir: Path | None = None


def ensure_model(cfg: ColdConfig, say: Say) -> int:
    """The bench's checkpoint (made once by `cascade model init`); its weight bytes."""
    if not (cfg.model_dir / "config.json").exists():
        say(f"making the model: {cfg.layers} layers x {cfg.hidden} hidden in {cfg.model_dir}")
        cli = Path(sys.executable).parent / "cascade"
        args = ["--layers", str(cfg.layers), "--hidden", str(cfg.hidden)]
        subprocess.run([str(cli), "model", "init", str(cfg.model_dir), *args], check=True)
    return sum(f.stat().st_size for f in cfg.model_dir.glob("*.safetensors"))


def _md(b: Bench, run: str) -> dict[str, Any]:
    doc: dict[str, Any] = b.custom.get_namespaced_custom_object(
        c.GROUP, c.VERSION, b.ns, c.MD_PLURAL, md_name(run)
    )
    return doc


def _ready_new(b: Bench, run: str, before: set[str]) -> Any | None:
    for pod in worker_pods(b, run):
        if pod.metadata.name not in before and pod_ready(pod) and pod.status.pod_ip:
            return pod
    return None


def _materialized(b: Bench, run: str) -> bool:
    """The deployment's profile Job succeeded (its artifact is beside the weights)."""
    shown = (_md(b, run).get("status") or {}).get("materialization") or {}
    if shown.get("phase") == "Failed":
        raise RuntimeError(f"{run}: the materialization Job failed")
    return bool(shown.get("phase") == "Succeeded")


def first_token_s(ip: str, timeout_s: float) -> float:
    """Seconds until the first streamed chunk of a one-token greedy request."""
    ask = {"request_id": "cold", "prompt": "Hello", "params": {"max_tokens": 1}}
    url = f"http://{ip}:{c.WORKER_PORT}/v1/generate"
    headers = {"Content-Type": "application/json", **headers_for(url)}
    req = urllib.request.Request(url, data=json.dumps(ask).encode(), headers=headers)
    began = time.monotonic()
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:
        resp.readline()
        return time.monotonic() - began


def _wait(what: str, check: Callable[[], Any], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while (got := check()) is None or got is False:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not seen in {timeout_s:.0f} s")
        time.sleep(POLL_S)
    return got


def one(
    b: Bench, run: str, mode: str, case: str, cfg: ColdConfig, uri: str, say: Say
) -> dict[str, Any]:
    spec = modes.mode_spec(
        modes.BASE_SPEC | {"model": {"uri": uri, "servedName": "cold"}}, mode, case
    )
    b.create(body(b.ns, run, spec))
    start = int(spec["replicas"])
    if start:
        b.wait_ready(run, start, cfg.timeout_s)
    if spec["hostCopies"]:
        b.wait_host_copies(run, cfg.timeout_s)
    if spec["materialization"]["enabled"]:  # the profile Job recorded the start-up state
        _wait(f"{run}: materialized", lambda: _materialized(b, run), cfg.timeout_s)
    before = {p.metadata.name for p in worker_pods(b, run)}
    say(f"{mode} {case}: scale {start} -> {start + 1}")
    t0 = time.monotonic()
    b.scale(run, start + 1)
    pod = _wait(f"{run}: a new Ready pod", lambda: _ready_new(b, run, before), cfg.timeout_s)
    ready_s = time.monotonic() - t0
    authorize(b.core, b.ns, md_name(run), [pod.status.pod_ip])
    token_s = first_token_s(pod.status.pod_ip, cfg.timeout_s)
    name = pod.metadata.name
    url = f"http://{pod.status.pod_ip}:{c.WORKER_PORT}{STATUS_PATH}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        worker = json.loads(resp.read())

    def instance() -> dict[str, Any] | None:
        shown = (_md(b, run).get("status") or {}).get("instances") or []
        got = next((i for i in shown if i["pod"] == name), None)
        ok = got and (got.get("startup") or {}).get("readySeconds") is not None
        return got if ok else None

    entry = _wait(f"{run}: {name}'s start-up in status", instance, 30.0)
    info = entry["startup"]
    stages = dict(info.get("stages") or {}) | {"first_token": round(token_s, 4)}
    stages["other"] = round(max(ready_s + token_s - sum(stages.values()), 0.0), 4)
    return {
        "pod": name,
        "to_first_token_s": ready_s + token_s,
        "ready_s": ready_s,
        "stages": stages,
        "weights_from": info.get("weightsFrom"),
        "weights_bytes": info.get("weightsBytes"),
        # Memory: its resident set beside the blocks it holds (one model copy + KV cache
        # + the runtime is the target; on CPU the store plays the accelerator's memory).
        "rss_bytes": worker.get("rssBytes"),
        "store_bytes": worker.get("storeBytes"),
        # The same, read from its processes as the host tier's is (`memory`).
        "pod_rss_bytes": memory.pods_rss_bytes({name: container_ids(pod)})[name],
        # What its engine start did with materialized state (restored, saved seconds).
        "materialization": worker.get("materialization"),
    } | report.restore_figures(worker.get("materialization"))


def container_ids(pod: Any) -> list[str | None]:
    return [s.container_id for s in (pod.status.container_statuses or [])]


def _live(pods: list[Any]) -> dict[str, list[str | None]]:
    return {p.metadata.name: container_ids(p) for p in pods if not p.metadata.deletion_timestamp}


def host_copy_pods(b: Bench, run: str) -> list[Any]:
    sel = f"{c.LABEL_DEPLOYMENT}={md_name(run)},{COMPONENT}={c.COMPONENT_HOST_COPY}"
    return list(b.core.list_namespaced_pod(b.ns, label_selector=sel).items)


def host_memory(b: Bench, run: str, cfg: ColdConfig, say: Say) -> report.HostMemory:
    """At replicas 1, 6 and 0: the resident memory of the host-copy pods and of the
    worker pods, and the blocks the copies report (status.hostCopies[].bytesHeld); None
    where the replicas were not reached in time or a pod could not be read."""
    copies = report.spec_host_copies(_md(b, run)["spec"])
    held: dict[str, int | None] = {}
    blocks: dict[str, int | None] = {}
    workers: dict[str, int | None] = {}
    for n in (1, 6, 0):
        key = f"replicas_{n}"
        b.scale(run, n)
        try:
            if n:
                b.wait_ready(run, n, cfg.timeout_s)
            else:
                _wait(f"{run}: no instance", lambda: not worker_pods(b, run), cfg.timeout_s)
        except TimeoutError as exc:
            say(f"host tier at replicas {n}: {exc}")
            held[key] = blocks[key] = workers[key] = None
            continue
        hosts, serving = _live(host_copy_pods(b, run)), _live(worker_pods(b, run))
        rss = memory.pods_rss_bytes(hosts | serving)
        held[key], workers[key] = memory.total(rss, hosts), memory.total(rss, serving)
        shown = (_md(b, run).get("status") or {}).get("hostCopies") or []
        blocks[key] = sum(int(h.get("bytesHeld") or 0) for h in shown)
        say(
            f"replicas {n}: host tier RSS {held[key]} B ({len(hosts)} of {copies} copies, "
            f"blocks {blocks[key]:,} B), workers RSS {workers[key]} B"
        )
    return report.HostMemory(copies, held, blocks, workers)


def run(cfg: ColdConfig, say: Say = print) -> dict[str, Any]:
    began = time.monotonic()
    size = ensure_model(cfg, say)
    uri = f"file://{cfg.model_dir.resolve()}"
    paths = StatePaths(cfg.state_dir or default_state_dir())
    rows: dict[str, dict[str, Any]] = {case: {} for case in cfg.cases}
    measured = report.HostMemory()
    with dev_cluster(paths, cfg.nodes, None) as brought_up:
        for case in cfg.cases:
            for mode in cfg.modes:
                run_name = f"cold-{mode}-{case}".replace("_", "-")
                with bench_namespace(paths.kubeconfig) as b:
                    try:
                        rows[case][mode] = one(b, run_name, mode, case, cfg, uri, say)
                        if mode == "pool" and case == "zero_to_one":
                            measured = host_memory(b, run_name, cfg, say)
                    except (TimeoutError, RuntimeError) as exc:  # the other modes still run
                        say(f"{mode} {case}: {exc}")
                        rows[case][mode] = {"skipped": str(exc)}
                    finally:
                        b.delete(run_name)
    choices = {
        "model_uri": uri,
        "model_bytes": size,
        "cluster": {"nodes": cfg.nodes, "brought_up": brought_up},
        "base_spec": modes.BASE_SPEC,
    }
    return report.document(choices, rows, measured, time.monotonic() - began)
