"""`cascade bench sampling`: one step's token choice at batch B over a V-token vocabulary,
the engine's batched sampler beside the per-row loop it replaced (kept here verbatim as
the baseline: a top-k, softmax, full sort and `multinomial` per row), same logits, same
requests, interleaved per round; medians and spread over rounds.

Logits are N(0, 2²) per token, a flat distribution: the nucleus of top-p 0.9 then holds
most of the vocabulary, the case that makes a sort-based filter pay for the whole sort.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CASES = {  # name: (temperature, top_k, top_p)
    "greedy": (0.0, 0, 1.0),
    "temperature": (0.8, 0, 1.0),
    "top_k_50": (0.8, 50, 1.0),
    "top_p_0.9": (0.8, 0, 0.9),
}


@dataclass(frozen=True)
class SamplingBenchConfig:
    batches: tuple[int, ...] = (1, 16, 64)
    vocab: int = 128256
    rounds: int = 5
    device: str = "cpu"
    threads: int = 1


def per_row_baseline(logits: Any, states: list[Any], generators: list[Any]) -> list[int]:
    """The sampler the engine used until 2026-12-04: one row at a time, on the host,
    each drawn by `multinomial` with its request's torch.Generator (made ahead, as the
    requests made theirs at admission)."""
    import torch

    from cascade_worker.engine.sampling import top_k_filter, top_p_filter

    out = []
    greedy = torch.argmax(logits, dim=-1).tolist()
    for i, s in enumerate(states):
        if s.generator is None:
            out.append(int(greedy[i]))
            continue
        row = top_k_filter(logits[i].float().cpu(), s.top_k)
        probs = top_p_filter(torch.softmax(row / s.temperature, dim=-1), s.top_p)
        out.append(int(torch.multinomial(probs, 1, generator=generators[i])))
    return out


def run(cfg: SamplingBenchConfig, say: Callable[[str], None] = print) -> dict[str, Any]:
    import torch

    from cascade_bench.enginebench.measure import clock
    from cascade_protocol.generate import SamplingParams
    from cascade_worker.engine.sampling import SamplerState, sample

    torch.set_num_threads(cfg.threads)
    device = torch.device(cfg.device)
    now = clock(device)
    paths: dict[str, Callable[..., list[int]]] = {
        "batched": lambda logits, states, _: sample(logits, states),
        "per_row": per_row_baseline,
    }
    rows = []
    for batch in cfg.batches:
        logits = torch.randn(batch, cfg.vocab, generator=torch.Generator().manual_seed(batch))
        logits = (logits * 2).to(device)
        for case, (t, k, p) in CASES.items():
            samples: dict[str, list[float]] = {name: [] for name in paths}
            for r in range(cfg.rounds + 1):  # round 0 warms up
                order = list(paths.items())[:: 1 if r % 2 else -1]
                for name, fn in order:
                    states = [
                        SamplerState.from_params(
                            SamplingParams(temperature=t, top_k=k, top_p=p, seed=r * 1000 + i)
                        )
                        for i in range(batch)
                    ]
                    gens = [torch.Generator().manual_seed(r * 1000 + i) for i in range(batch)]
                    began = now()
                    fn(logits, states, gens)
                    if r:
                        samples[name].append((now() - began) * 1000)
            row: dict[str, Any] = {"batch": batch, "vocab": cfg.vocab, "case": case}
            row["device"] = cfg.device
            for name, values in samples.items():
                row[f"{name}_ms"] = statistics.median(values)
                row[f"{name}_ms_range"] = [min(values), max(values)]
            row["speedup"] = row["per_row_ms"] / row["batched_ms"]
            say(f"batch {batch} {case}: {row['batched_ms']:.1f} vs {row['per_row_ms']:.1f} ms")
            rows.append(row)
    return {"threads": cfg.threads, "device": cfg.device, "rows": rows}


def table(doc: dict[str, Any]) -> str:
    lines = [f"{'batch':>5} {'vocab':>7} {'case':<12} {'batched ms':>18} {'per-row ms':>20} "
             f"{'speedup':>8}"]  # fmt: skip
    for r in doc["rows"]:
        b, p = r["batched_ms_range"], r["per_row_ms_range"]
        lines.append(
            f"{r['batch']:>5} {r['vocab']:>7} {r['case']:<12} "
            f"{r['batched_ms']:>7.1f} ({b[0]:.1f}-{b[1]:.1f}) "
            f"{r['per_row_ms']:>8.1f} ({p[0]:.1f}-{p[1]:.1f}) {r['speedup']:>7.1f}x"
        )
    lines.append(f"one step's token choice, median (min-max) over rounds; {doc['device']}, "
                 f"{doc['threads']} thread(s)")  # fmt: skip
    return "\n".join(lines)
