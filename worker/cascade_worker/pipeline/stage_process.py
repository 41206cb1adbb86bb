"""Process entry point: one pipeline stage.

    python -m cascade_worker.pipeline.stage_process --model-dir DIR --layers A:B \\
        --listen HOST:PORT [--device cpu] [--threads N] [--log-level INFO]

Loads the weights of layers [A, B) from an HF checkpoint directory, listens on
HOST:PORT (port 0: any free port) and prints one line `READY HOST:PORT` on stdout once
it accepts heads; then serves until SIGTERM or SIGINT. The KV cache is allocated when
a head attaches (with the head's geometry). Exit status 0 after a signal, 1 on error.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from cascade_worker.transport.env import stop_notifier, use_notifier_thread

log = logging.getLogger("cascade_worker.pipeline.stage_process")


def parse_layers(text: str) -> tuple[int, int]:
    start, sep, end = text.partition(":")
    if not sep or not start.isdigit() or not end.isdigit() or int(start) >= int(end):
        raise argparse.ArgumentTypeError(f"layers {text!r} is not A:B with A < B")
    return int(start), int(end)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cascade_worker.pipeline.stage_process")
    p.add_argument("--model-dir", type=Path, required=True, help="HF checkpoint directory")
    p.add_argument("--layers", type=parse_layers, required=True, help="A:B, layers [A, B)")
    p.add_argument("--listen", required=True, help="HOST:PORT to listen on (port 0: any)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    p.add_argument("--log-level", default=os.environ.get("CASCADE_LOG_LEVEL", "INFO"))
    return p.parse_args(argv)


async def amain(args: argparse.Namespace) -> None:
    from cascade_protocol.peer_auth import key_from_env
    from cascade_worker.blocks.store import BlockStore
    from cascade_worker.engine.config import ModelConfig
    from cascade_worker.engine.weights import load_stage_weights
    from cascade_worker.pipeline.server import StageServer
    from cascade_worker.transport.pool import parse_address

    host, _, any_port = args.listen.rpartition(":")
    host, port = (host, 0) if any_port == "0" else parse_address(args.listen)
    start, end = args.layers
    store = BlockStore.from_model_dir(args.model_dir, 1)
    config = ModelConfig.from_hf(store.manifest.config)
    if end > config.num_layers:
        raise ValueError(f"layers {start}:{end} outside the model's {config.num_layers}")
    weights = load_stage_weights(store, config, start, end, device=args.device)
    key = key_from_env()  # $CASCADE_PEER_TOKEN, as in a worker; unset: open
    server = StageServer(config, weights, host=host, port=port, device=args.device, key=key)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"READY {server.address}", flush=True)
    try:
        await stop.wait()
    finally:
        await server.close()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    use_notifier_thread()  # one loop per process
    logging.basicConfig(
        level=args.log_level.upper(),
        format=f"%(asctime)s stage[{args.layers[0]}:{args.layers[1]}] %(levelname)s "
        "%(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("ucx").setLevel(logging.WARNING)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        asyncio.run(amain(args))
    except Exception:
        log.exception("stage %s:%s failed", *args.layers)
        return 1
    finally:
        stop_notifier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
