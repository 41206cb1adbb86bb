"""`cascade bench digests`: what verifying weights costs a receiver. One source sends a
synthetic model to one target over UCX on loopback (multicast/local.py, one process),
rounds alternating digests on (the product: xxh3 and SHA-256 of every block, on a thread
while the next block arrives) and off (the target's check skipped: a baseline only the
bench can have). Per round: the target's receive rate (model bytes / its completion
time) and the event loop's longest stall, from a task that asks to wake every
millisecond beside the transfer: over the whole run (node start-up included) and over
the receive window, from the first block held to the last, where every later block's
digests run. Medians and spread over rounds.

On two cores loopback measures the CPU (the sender, the receiver, UCX's progress thread
and the hashing share them), so the ratio is the figure; the absolute rate is not a
network's.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cascade_worker.blocks.store import BlockStore
from cascade_worker.multicast.local import run_local_async
from cascade_worker.multicast.result import NodeResult
from cascade_worker.multicast.runner import MulticastNode, NodeOptions

WAKE_S = 0.001


@dataclass(frozen=True)
class DigestBenchConfig:
    blocks: int = 16
    block_mb: float = 16.0
    rounds: int = 5


async def _round(cfg: DigestBenchConfig, digests: bool) -> tuple[float, float, float]:
    """(receive GB/s, the loop's longest stall in ms over the run, and over the receive
    window) of one transfer."""
    stall = window = 0.0
    block_bytes = int(cfg.block_mb * 2**20)

    async def watch(nodes: dict[str, MulticastNode], stores: dict[str, BlockStore]) -> None:
        nonlocal stall, window
        target = stores["t0"]
        if not digests:
            target.check = lambda index: None  # type: ignore[method-assign]
        while not target.complete():
            receiving = bool(target.held())
            began = time.perf_counter()
            await asyncio.sleep(WAKE_S)
            late = time.perf_counter() - began - WAKE_S
            stall = max(stall, late)
            if receiving:
                window = max(window, late)

    opts = NodeOptions(stall_timeout_s=60, deadline_s=300, linger_s=0.2)
    run = await run_local_async("chain", 1, 1, num_blocks=cfg.blocks, block_bytes=block_bytes,
                                options=opts, scenario=watch)  # fmt: skip
    result = run.results["t0"]
    if not isinstance(result, NodeResult) or result.complete_s is None:
        raise RuntimeError(f"the transfer did not complete: {result!r}")
    return cfg.blocks * block_bytes / result.complete_s / 1e9, stall * 1000, window * 1000


def run(cfg: DigestBenchConfig, say: Callable[[str], None] = print) -> dict[str, Any]:
    return asyncio.run(_run(cfg, say))


async def _run(cfg: DigestBenchConfig, say: Callable[[str], None]) -> dict[str, Any]:
    samples: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for r in range(cfg.rounds + 1):  # round 0 warms UCX and the allocator
        for digests in (True, False) if r % 2 else (False, True):
            gbps, stall_ms, window_ms = await _round(cfg, digests)
            say(f"round {r} digests {'on' if digests else 'off'}: {gbps:.2f} GB/s, "
                f"loop stall {stall_ms:.1f} ms ({window_ms:.1f} while receiving)")  # fmt: skip
            if r:
                samples[digests].append((gbps, stall_ms, window_ms))
    doc: dict[str, Any] = {"blocks": cfg.blocks, "block_mb": cfg.block_mb, "rounds": cfg.rounds}
    for digests, name in ((True, "on"), (False, "off")):
        rates = [g for g, _, _ in samples[digests]]
        doc[f"digests_{name}_gbps"] = statistics.median(rates)
        doc[f"digests_{name}_gbps_range"] = [min(rates), max(rates)]
        doc[f"max_loop_stall_ms_{name}"] = max(s for _, s, _ in samples[digests])
        doc[f"max_receiving_stall_ms_{name}"] = max(w for _, _, w in samples[digests])
        doc[f"samples_{name}"] = samples[digests]
    pairs = zip(samples[True], samples[False], strict=True)
    ratios = [on[0] / off[0] for on, off in pairs]
    doc["ratio_on_off"] = statistics.median(ratios)
    doc["ratio_on_off_range"] = [min(ratios), max(ratios)]
    return doc


def table(doc: dict[str, Any]) -> str:
    lines = [f"{'digests':<8} {'GB/s (median, range)':>22} {'longest stall ms':>17} "
             f"{'while receiving':>16}"]  # fmt: skip
    for name in ("on", "off"):
        lo, hi = doc[f"digests_{name}_gbps_range"]
        rate = f"{doc[f'digests_{name}_gbps']:.2f} ({lo:.2f}-{hi:.2f})"
        lines.append(f"{name:<8} {rate:>22} {doc[f'max_loop_stall_ms_{name}']:>17.1f} "
                     f"{doc[f'max_receiving_stall_ms_{name}']:>16.1f}")  # fmt: skip
    lo, hi = doc["ratio_on_off_range"]
    lines.append(f"on / off: {doc['ratio_on_off']:.2f} ({lo:.2f}-{hi:.2f}) over "
                 f"{doc['rounds']} paired rounds; {doc['blocks']} blocks of "
                 f"{doc['block_mb']:g} MiB, one source -> one target, UCX on loopback")  # fmt: skip
    return "\n".join(lines)
