"""`cascade bench engine`: the engine's eager and compiled paths vs transformers on one
checkpoint, and the compiled path's start-up cost (issue 12). Registered by
`bench.add_parser`; the work is in `cascade_bench.enginebench` (imported on run)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from cascade_cli.bench_json import ints, report, say, subset
from cascade_protocol.cli_args import from_args


def add(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cascade_bench.enginebench.run import PATHS  # pure module, no torch at import

    en = cmds.add_parser(
        "engine",
        help="engine eager vs compiled vs transformers: decode/prefill tokens/s, compile s",
        description="On one checkpoint (--model-dir, or one made with --arch/--layers/"
        "--hidden): decode tokens/s at each --batches and prefill tokens/s at each "
        "--prompts for the engine eager, compiled (padded buckets), compiled with dynamic "
        "shapes, and transformers' generate, paths interleaved per round, medians; then "
        "the compile warm-up in fresh processes: cold, warm inductor cache, restored "
        "cache artifacts. Prints a table; --json writes {rows, compile_s}.",
    )
    en.add_argument(
        "--model", "--model-dir", dest="model_dir", type=Path, default=None,
        help="HF checkpoint to use (e.g. the real SmolLM2 of `cascade model import`)",
    )  # fmt: skip
    en.add_argument("--arch", choices=("llama", "qwen2", "mistral"), default="llama")
    en.add_argument("--layers", type=int, default=4)
    en.add_argument("--hidden", type=int, default=512)
    en.add_argument("--batches", type=ints, default=(1, 4, 16), help="decode batch sizes")
    en.add_argument("--prompts", type=ints, default=(128, 512), help="prefill prompt tokens")
    en.add_argument("--new-tokens", type=int, default=64, help="decoded tokens per sequence")
    en.add_argument("--rounds", type=int, default=3)
    en.add_argument(
        "--threads", type=ints, default=(1,), help="torch threads, a list: 1,2 measures both"
    )
    en.add_argument(
        "--paths", type=lambda t: subset(t, PATHS, "paths"), default=PATHS,
        help=f"subset of {','.join(PATHS)}",
    )  # fmt: skip
    en.add_argument(
        "--device", default="cpu",
        help="cpu, or cuda / cuda:N: both paths on that GPU in bfloat16 (clock: wall, synced)",
    )  # fmt: skip
    en.add_argument("--no-compile-times", action="store_true", help="skip the probes")
    en.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    en.set_defaults(func=_engine)
    sa = cmds.add_parser(
        "sampling",
        help="one step's token choice: the batched sampler vs the per-row loop it replaced",
        description="At each --batches over a --vocab-token vocabulary: greedy, "
        "temperature, top-k 50 and top-p 0.9, the engine's batched sampler beside the "
        "per-row loop (one sort per row) it replaced, interleaved, --rounds each; prints "
        "a table; --json writes {rows}.",
    )
    sa.add_argument("--batches", type=ints, default=(1, 16, 64))
    sa.add_argument("--vocab", type=int, default=128256, help="Llama-3's vocabulary by default")
    sa.add_argument("--rounds", type=int, default=5)
    sa.add_argument("--device", default="cpu")
    sa.add_argument("--threads", type=int, default=1)
    sa.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    sa.set_defaults(func=_sampling)
    dg = cmds.add_parser(
        "digests",
        help="a receiver's rate with weight digests on vs off, and its event loop's stalls",
        description="One source -> one target over UCX on loopback, --rounds paired rounds "
        "of digests on (xxh3 + SHA-256 per block, off the event loop) and off; prints the "
        "receive rates, their ratio and the longest event-loop stall; --json writes them.",
    )
    dg.add_argument("--blocks", type=int, default=16)
    dg.add_argument("--block-mb", type=float, default=16.0)
    dg.add_argument("--rounds", type=int, default=5)
    dg.add_argument("--json", type=Path, default=None, metavar="OUT.json")
    dg.set_defaults(func=_digests)


def _engine(args: argparse.Namespace) -> int:
    from cascade_bench.enginebench.run import EngineBenchConfig, run, table

    if args.rounds < 1 or args.new_tokens < 2:
        raise ValueError("--rounds must be >= 1 and --new-tokens >= 2")
    model_dir = args.model_dir
    if model_dir is None:
        from cascade_worker.checkpoints.checkpoint import write_checkpoint
        from cascade_worker.checkpoints.spec import ModelSpec

        model_dir = Path(tempfile.mkdtemp(prefix="cascade-bench-model-"))
        spec = ModelSpec(arch=args.arch, layers=args.layers, hidden=args.hidden)
        write_checkpoint(model_dir, spec)
    cfg = from_args(
        EngineBenchConfig, args, model_dir=model_dir, compile_times=not args.no_compile_times
    )
    return report(run(cfg, say=say), table, args.json)


def _sampling(args: argparse.Namespace) -> int:
    from cascade_bench.enginebench.sampling import SamplingBenchConfig, run, table

    if args.rounds < 1:
        raise ValueError("--rounds must be >= 1")
    return report(run(from_args(SamplingBenchConfig, args), say=say), table, args.json)


def _digests(args: argparse.Namespace) -> int:
    from cascade_bench.digests import DigestBenchConfig, run, table
    from cascade_worker.transport.env import use_notifier_thread

    if args.rounds < 1 or args.blocks < 1:
        raise ValueError("--rounds and --blocks must be >= 1")
    use_notifier_thread()  # one loop for every node, woken by UCX (as the workers run)
    return report(run(from_args(DigestBenchConfig, args), say=say), table, args.json)
