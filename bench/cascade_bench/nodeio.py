"""What a benchmark participant reads and writes: the block-size table and its result.

The harness packs the model once and writes `blocks.json` (index, nbytes, checksum per
block), so a receiving participant can preallocate its buffers without the checkpoint.
Results use the same JSON shape as a Cascade multicast node's, so one aggregator reads all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class BlockInfo:
    index: int
    nbytes: int
    checksum: str


def write_blocks(path: Path, blocks: Sequence[BlockInfo]) -> None:
    doc = [{"index": b.index, "nbytes": b.nbytes, "checksum": b.checksum} for b in blocks]
    path.write_text(json.dumps(doc) + "\n")


def read_blocks(path: Path) -> list[BlockInfo]:
    doc = json.loads(path.read_text())
    return [BlockInfo(int(d["index"]), int(d["nbytes"]), str(d["checksum"])) for d in doc]


def result_doc(
    node: str,
    arrivals: Mapping[int, float],
    complete_s: float | None,
    missing: Sequence[int],
    bytes_received: int,
    start_wall: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "node": node,
        "block_arrivals": {str(k): v for k, v in sorted(arrivals.items())},
        "complete_s": complete_s,
        "missing": list(missing),
        "bytes_received": bytes_received,
        "start_wall": start_wall,
        **extra,
    }


def write_json(path: Path, doc: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    tmp.replace(path)
