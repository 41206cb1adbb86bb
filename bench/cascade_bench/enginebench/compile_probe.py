"""How long the compiled path's warm-up takes in a fresh process: cold (empty inductor
cache), warm (the cache a previous process filled), restored (an empty cache, then the
artifacts a previous process saved with `torch.compiler.save_cache_artifacts`, loaded
with `load_cache_artifacts`: the "materialized" start a profile job would enable).

`python -m cascade_bench.enginebench.compile_probe` is one fresh process (prints one
JSON line); `probe_all` runs the three in order and returns their seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", type=Path, required=True)
    ap.add_argument("--max-batch", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--save", type=Path, default=None)
    ap.add_argument("--load", type=Path, default=None)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from cascade_worker.engine.engine import LLMEngine

    load_s = 0.0
    if args.load is not None:
        began = time.perf_counter()
        torch.compiler.load_cache_artifacts(args.load.read_bytes())
        load_s = time.perf_counter() - began
    engine = LLMEngine.from_model_dir(
        args.model_dir, max_batch=args.max_batch, compile=True,
        compile_max_tokens=args.max_tokens, kv_cache_tokens=args.max_batch * 1024,
    )  # fmt: skip
    assert engine.startup is not None and engine.startup.compile_s is not None
    out: dict[str, Any] = {"warmup_s": engine.startup.compile_s, "load_s": load_s}
    if args.save is not None:
        saved = torch.compiler.save_cache_artifacts()
        if saved is None:
            raise RuntimeError("torch.compiler.save_cache_artifacts() saved nothing")
        args.save.write_bytes(saved[0])
        out["artifact_bytes"] = len(saved[0])
    print(json.dumps(out))


def _probe(args: list[str], cache_dir: Path) -> dict[str, Any]:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache_dir))
    cmd = [sys.executable, "-m", "cascade_bench.enginebench.compile_probe", *args]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"compile probe failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def probe_all(model_dir: Path, max_batch: int, max_tokens: int, workdir: Path) -> dict[str, Any]:
    """{cold, warm_cache, restored_artifacts} warm-up seconds (restored includes the
    artifact load), plus the artifact's size; `workdir` must be fresh."""
    base = ["--model-dir", str(model_dir), "--max-batch", str(max_batch)]
    base += ["--max-tokens", str(max_tokens)]
    artifacts = workdir / "artifacts.bin"
    cold = _probe([*base, "--save", str(artifacts)], workdir / "cache-a")
    warm = _probe(base, workdir / "cache-a")
    restored = _probe([*base, "--load", str(artifacts)], workdir / "cache-b")
    return {
        "cold": cold["warmup_s"],
        "warm_cache": warm["warmup_s"],
        "restored_artifacts": restored["warmup_s"] + restored["load_s"],
        "artifact_load_s": restored["load_s"],
        "artifact_bytes": cold["artifact_bytes"],
        "cache_dir": str(workdir / "cache-a"),
    }


if __name__ == "__main__":
    main()
