"""`cascade bench engine`: decode and prefill tokens/s of the engine, eager and
compiled, beside transformers' `generate` on the same checkpoint, and what compiling
costs at start-up (cold, warm cache, restored artifacts; compile_probe.py).

One process, one thread by default (`--threads`, a list: each count is measured in turn
and every row says its count), paths interleaved inside every round
so drifting load hits them alike; medians over rounds. The compiled engines use the
inductor cache the cold probe filled, so their in-process warm-up is not the figure:
`compile_s` is. The document also carries the machine's load average before and after,
to say how noisy the run was.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PATHS = ("eager", "compiled", "compiled_dynamic", "transformers")


@dataclass(frozen=True)
class EngineBenchConfig:
    model_dir: Path
    batches: tuple[int, ...] = (1, 4, 16)
    prompts: tuple[int, ...] = (128, 512)
    new_tokens: int = 64
    rounds: int = 3
    threads: tuple[int, ...] = (1,)
    paths: tuple[str, ...] = PATHS
    compile_times: bool = True
    device: str = "cpu"  # "cuda": both sides in the engine's CUDA dtype (bf16), same GPU


def _engines(cfg: EngineBenchConfig, max_batch: int, max_tokens: int) -> dict[str, Any]:
    import torch

    from cascade_worker.engine.config import ModelConfig
    from cascade_worker.engine.engine import LLMEngine
    from cascade_worker.engine.weights import compute_dtype

    engines: dict[str, Any] = {}
    for path in cfg.paths:
        if path == "transformers":
            import transformers

            config = ModelConfig.from_hf(json.loads((cfg.model_dir / "config.json").read_text()))
            model: Any = transformers.AutoModelForCausalLM.from_pretrained(
                cfg.model_dir, dtype=compute_dtype(config, torch.device(cfg.device))
            )
            engines[path] = model.to(cfg.device).eval()
            continue
        engines[path] = LLMEngine.from_model_dir(
            cfg.model_dir, max_batch=max_batch, prefill_budget=max(cfg.prompts),
            kv_cache_tokens=kv_tokens(cfg, max_batch),
            compile=path != "eager", compile_max_tokens=max_tokens,
            compile_dynamic=path == "compiled_dynamic", device=cfg.device,
        )  # fmt: skip
    return engines


def _measure(path: str, engine: Any, phase: str, size: int, new: int, vocab: int) -> float:
    from cascade_bench.enginebench import measure as m

    if path == "transformers":
        if phase == "decode":
            return m.hf_decode(engine, size, new, vocab)
        return m.hf_prefill(engine, size, vocab)
    if phase == "decode":
        return m.engine_decode(engine, size, new)
    return m.engine_prefill(engine, size)


def run(cfg: EngineBenchConfig, say: Callable[[str], None] = print) -> dict[str, Any]:
    import torch

    from cascade_bench.enginebench.compile_probe import probe_all

    torch.set_num_threads(cfg.threads[0])
    max_batch, max_tokens = max(cfg.batches), max(*cfg.batches, *cfg.prompts)
    doc: dict[str, Any] = {"model_dir": str(cfg.model_dir), "threads": list(cfg.threads)}
    doc["device"] = _device_name(cfg.device)
    doc["loadavg_before"] = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="cascade-bench-engine-"))
    if cfg.compile_times:
        say(f"compile probes (cold, warm cache, restored artifacts) in {work} ...")
        doc["compile_s"] = probe_all(cfg.model_dir, max_batch, max_tokens, work)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = doc["compile_s"]["cache_dir"]
    say("building engines ...")
    engines = _engines(cfg, max_batch, max_tokens)
    vocab = next(e.config.vocab for p, e in engines.items() if p != "transformers")
    cases = [("decode", b) for b in cfg.batches] + [("prefill", p) for p in cfg.prompts]
    for path, engine in engines.items():  # one untimed pass: caches, allocator, graphs
        for phase, size in cases:
            _measure(path, engine, phase, size, 4, vocab)
    samples: dict[tuple[int, str, str, int], list[float]] = {}
    for threads in cfg.threads:
        torch.set_num_threads(threads)
        for r in range(cfg.rounds):
            say(f"{threads} thread(s), round {r + 1}/{cfg.rounds} (load {os.getloadavg()[0]:.2f})")
            order = list(engines.items())[:: 1 if r % 2 == 0 else -1]  # drift cancels
            for phase, size in cases:
                for path, engine in order:
                    value = _measure(path, engine, phase, size, cfg.new_tokens, vocab)
                    samples.setdefault((threads, path, phase, size), []).append(value)
    doc["rows"] = [
        {
            "threads": threads,
            "path": path,
            "phase": phase,
            "batch": size if phase == "decode" else 1,
            "prompt": size if phase == "prefill" else 16,
            "tokens_per_s": statistics.median(values),
            "samples": values,
            **paired_ratio(values, samples.get((threads, "transformers", phase, size))),
        }
        for (threads, path, phase, size), values in samples.items()
    ]
    doc["loadavg_after"] = os.getloadavg()
    return doc


def kv_tokens(cfg: EngineBenchConfig, max_batch: int) -> int:
    """A KV cache for what the bench runs, not the device's free memory (on a GPU that
    would leave no room for transformers beside it): the decode batch's contexts or one
    full context, whichever is more."""
    from cascade_bench.enginebench.measure import DECODE_PROMPT

    config = json.loads((cfg.model_dir / "config.json").read_text())
    contexts = max_batch * (DECODE_PROMPT + cfg.new_tokens + 16)
    return max(contexts, int(config["max_position_embeddings"]) + 16)


def _device_name(device: str) -> str:
    import torch

    if torch.device(device).type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(torch.device(device))})"
    return device


def paired_ratio(values: list[float], hf: list[float] | None) -> dict[str, Any]:
    """{"vs_transformers": median, min, max of the per-round ratios}: a round times both
    paths back to back, so its ratio is less exposed to the machine's drift than the
    ratio of two medians. {} for transformers itself or where it did not run."""
    if hf is None or values is hf:
        return {}
    ratios = [v / h for v, h in zip(values, hf, strict=True)]
    return {
        "vs_transformers": {
            "median": statistics.median(ratios),
            "min": min(ratios),
            "max": max(ratios),
        }
    }


def table(doc: dict[str, Any]) -> str:
    """threads/phase/size rows, one tokens/s column per path (and each path's ratio to
    transformers where it ran), then the compile seconds. Older documents have one
    thread count at the top and none in the rows."""
    rows = doc["rows"]
    paths = list(dict.fromkeys(r["path"] for r in rows))
    keys = list(
        dict.fromkeys((r.get("threads", doc["threads"]), r["phase"], r["batch"], r["prompt"])
                      for r in rows)
    )  # fmt: skip
    value = {(r.get("threads", doc["threads"]), r["path"], r["phase"], r["batch"], r["prompt"]): r
             for r in rows}  # fmt: skip
    ratios = [p for p in paths if p != "transformers"] if "transformers" in paths else []
    head = f"{'threads':>7} {'phase':<8} {'batch':>5} {'prompt':>6} "
    lines = [head + " ".join(f"{p:>16}" for p in paths)
             + "".join(f" {p + '/hf':>16}" for p in ratios)]  # fmt: skip
    for threads, phase, batch, prompt in keys:
        cells = []
        for p in paths:
            row = value.get((threads, p, phase, batch, prompt))
            cells.append(f"{row['tokens_per_s']:>16.0f}" if row else f"{'-':>16}")
        hf = value.get((threads, "transformers", phase, batch, prompt))
        for p in ratios:
            row = value.get((threads, p, phase, batch, prompt))
            if row and "vs_transformers" in row:
                pair = row["vs_transformers"]
                cell = f"{pair['median']:.2f}x ({pair['min']:.2f}-{pair['max']:.2f})"
                cells.append(f"{cell:>24}")
            elif row and hf:
                cells.append(f"{row['tokens_per_s'] / hf['tokens_per_s']:>15.2f}x")
            else:
                cells.append(f"{'-':>16}")
        lines.append(f"{threads:>7} {phase:<8} {batch:>5} {prompt:>6} " + " ".join(cells))
    lines.append(f"{doc.get('device', 'cpu')}; tokens/s, median over rounds; p/hf: median "
                 "(min-max) of per-round ratios; load "
                 f"{doc['loadavg_before'][0]:.2f} -> {doc['loadavg_after'][0]:.2f}")  # fmt: skip
    if "compile_s" in doc:
        c = doc["compile_s"]
        lines.append(
            f"compile warm-up s: cold {c['cold']:.1f}, warm cache {c['warm_cache']:.1f}, "
            f"restored artifacts {c['restored_artifacts']:.1f} "
            f"(load {c['artifact_load_s']:.2f}, {c['artifact_bytes'] / 2**20:.1f} MiB)"
        )
    return "\n".join(lines)
