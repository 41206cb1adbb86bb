"""One rank of the `torch.distributed` (gloo) broadcast baseline.

Rank 0 packs the checkpoint into the same block buffers Cascade sends; the other ranks
preallocate theirs from `blocks.json`. After the process group is up (connections made,
off the clock) each rank signals ready, waits for the common start, then every block is
broadcast from rank 0 in order with `dist.broadcast`. Receivers verify checksums after the
clock stops. Run as `python -m cascade_bench.gloo_node ...` inside a node's namespace.
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from cascade_bench.nodeio import read_blocks, result_doc, write_json
from cascade_bench.procs import await_start


def _buffers(args: argparse.Namespace) -> list[np.ndarray]:
    infos = read_blocks(args.blocks)
    if args.model_dir is None:
        return [np.empty(b.nbytes, dtype=np.uint8) for b in infos]
    from cascade_worker.blocks import pack_model

    packed = pack_model(args.model_dir, len(infos))
    if [b.nbytes for b in packed.manifest.blocks] != [b.nbytes for b in infos]:
        raise SystemExit("packed block sizes differ from blocks.json")
    return packed.buffers


def run(args: argparse.Namespace) -> None:
    buffers = _buffers(args)
    tensors = [torch.from_numpy(b) for b in buffers]
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{args.master}",
        rank=args.rank,
        world_size=args.world,
        timeout=dt.timedelta(seconds=args.timeout),
    )
    dist.barrier()  # every pair connected before the clock starts
    args.ready.touch()
    start = await_start(args.start)
    arrivals: dict[int, float] = {}
    for i, tensor in enumerate(tensors):
        dist.broadcast(tensor, src=0)
        arrivals[i] = time.time() - start
    done = time.time() - start
    corrupt: list[int] = []  # checked off the clock; a bad block counts as missing
    if args.rank != 0:
        from cascade_worker.blocks.manifest import checksum

        infos = read_blocks(args.blocks)
        corrupt = [
            i.index for b, i in zip(buffers, infos, strict=True) if checksum(b) != i.checksum
        ]
    received = 0 if args.rank == 0 else sum(b.nbytes for b in buffers)
    write_json(args.result, result_doc(args.name, arrivals, done, corrupt, received, start))
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--name", required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--master", required=True, help="HOST:PORT of rank 0's rendezvous store")
    p.add_argument("--blocks", type=Path, required=True, help="blocks.json from the harness")
    p.add_argument("--model-dir", type=Path, default=None, help="rank 0: the checkpoint")
    p.add_argument("--ready", type=Path, required=True)
    p.add_argument("--start", type=Path, required=True)
    p.add_argument("--result", type=Path, required=True)
    p.add_argument("--timeout", type=float, default=600.0)
    run(p.parse_args())


if __name__ == "__main__":
    main()
