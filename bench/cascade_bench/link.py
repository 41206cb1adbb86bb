"""The single-link check and the loopback comparison.

Link: one pod sends N bytes to a pod on another node through both shaped NICs; the
achieved rate is compared with the shaped rate (the fabric's and transport's overhead).
Loopback: GB/s of the transport on 127.0.0.1 next to a plain-socket baseline, same run.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from cascade_bench import xfer
from cascade_bench.bound import rate_mbit
from cascade_bench.pods import BenchPod
from cascade_bench.procs import Launch
from cascade_bench.results import RunSummary
from cascade_bench.steps import StepDir, fresh_port


def link_launches(
    step: StepDir, kind: str, src: BenchPod, dst: BenchPod, nbytes: int
) -> list[Launch]:
    common = [  # fresh port: see fresh_port
        "--kind", kind,
        "--host", dst.net.ip,
        "--port", str(fresh_port()),
        "--bytes", str(nbytes),
        "--start", str(step.start),
    ]  # fmt: skip
    out = []
    for role, pod in (("recv", dst), ("send", src)):
        argv = [sys.executable, "-m", "cascade_bench.link_node", role, *common]
        argv += ["--name", pod.name, "--ready", str(step.ready(pod.name))]
        argv += ["--result", str(step.result(pod.name))]
        out.append(Launch(pod.name, argv, step.log(pod.name), pod.prefix, {}, step.ready(pod.name)))
    return out


def link_entry(run: RunSummary, nbytes: int, shaped_mbit: int) -> dict[str, Any]:
    """Rate achieved by one transfer, as Mbit/s and as a fraction of the shaped rate."""
    seconds = run.completion_s
    if seconds is None or seconds <= 0:
        return {"error": run.error or "no result"}
    achieved = rate_mbit(nbytes, seconds)
    doc = {
        "bytes": nbytes,
        "seconds": seconds,
        "achieved_mbit": achieved,
        "fraction": achieved / shaped_mbit,
    }
    if run.cpu:  # CPU cost of moving the bytes: what a relay on a busy host pays per hop
        doc["cpu_s"] = run.cpu["participants_cpu_s"]
        doc["cpu_s_per_GB"] = run.cpu["participants_cpu_s"] / (nbytes / 1e9)
    return doc


def link_summary(entries: dict[str, dict[str, Any]], nbytes: int, shaped: int) -> dict[str, Any]:
    """Headline = the best transport measured (cascade, else ucxx, else socket)."""
    doc: dict[str, Any] = {"bytes": nbytes, "shaped_mbit": shaped, **entries}
    for method in ("cascade", "ucxx", "socket"):
        entry = entries.get(method) or {}
        if "achieved_mbit" in entry:
            doc.update(method=method, achieved_mbit=entry["achieved_mbit"])
            doc.update(fraction=entry["fraction"], bytes=entry["bytes"])
            return doc
    doc["error"] = "; ".join(f"{k}: {v.get('error')}" for k, v in entries.items())
    return doc


def _transport_loopback() -> Callable[[int], Any] | None:
    """The transport's own `measure_loopback(nbytes)`, where the transport provides it."""
    for name in ("cascade_worker.transport", "cascade_worker.transport.bench"):
        try:
            fn = getattr(importlib.import_module(name), "measure_loopback", None)
        except ImportError:
            continue
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    return None


def loopback(nbytes: int) -> dict[str, Any]:
    """GB/s over 127.0.0.1, all in this run: Cascade's transport (its Endpoint over ucxx,
    with its asyncio-socket baseline), bare ucxx, and blocking plain sockets."""
    doc: dict[str, Any] = {"bytes": nbytes}
    errors = []
    measure = _transport_loopback()
    if measure is None:
        errors.append("cascade_worker.transport.measure_loopback not available")
    else:
        try:
            got = measure(nbytes)
            doc["transport_GBps"] = float(got["ucxx_gbps"])
            doc["socket_asyncio_GBps"] = float(got["socket_gbps"])
        except Exception as exc:  # reported, not fatal
            errors.append(f"transport: {exc!r}")
    probes: list[tuple[str, Callable[[], float]]] = [
        ("ucxx_raw_GBps", lambda: nbytes / xfer.ucxx_loopback(nbytes) / 1e9),
        ("socket_GBps", lambda: nbytes / xfer.socket_loopback(nbytes) / 1e9),
    ]
    for key, probe in probes:
        try:
            doc[key] = probe()
        except Exception as exc:
            errors.append(f"{key}: {exc!r}")
    if errors:
        doc["error"] = "; ".join(errors)
    return doc
