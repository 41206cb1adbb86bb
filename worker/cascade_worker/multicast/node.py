"""Process entry point: one simulated node of a multicast transfer.

    python -m cascade_worker.multicast.node --plan plan.json --me NAME \\
        --listen HOST:PORT --peers peers.json (--model-dir DIR | --receive) \\
        --result out.json [--chunk-bytes N] [--rate-mbit R] [--deadline-s S] ...

plan.json is a ScalePlan spec (or a whole ScalePlan object with a `spec`), as written by
cascade_planner.plan_spec. peers.json maps every pod in the plan to its "host:port".
Sources pass --model-dir (the checkpoint is packed into the plan's number of blocks and
must match the plan's model digest); receivers pass --receive and get the manifest from
the leader. The benchmark starts one such process per node (each in its own network
namespace) in any order: nodes wait for each other, and the leader starts them together.

The result JSON ({"node", "block_arrivals": {index: s}, "complete_s", "missing",
"bytes_received", ...}; see result.py) is written when the node's own transfer ends and
rewritten at exit. Exit status: 0 complete, 2 finished with missing blocks, 1 error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from cascade_api.scaleplan import ScalePlanSpec
from cascade_protocol.peer_auth import key_from_env
from cascade_worker.multicast.result import NodeResult
from cascade_worker.multicast.runner import MulticastNode, NodeOptions
from cascade_worker.transport.env import stop_notifier, use_notifier_thread
from cascade_worker.transport.pool import parse_address

log = logging.getLogger("cascade_worker.multicast.node")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m cascade_worker.multicast.node")
    p.add_argument("--plan", type=Path, required=True, help="ScalePlan spec JSON")
    p.add_argument("--me", required=True, help="this node's pod name in the plan")
    p.add_argument("--listen", required=True, help="HOST:PORT to listen on")
    p.add_argument("--peers", type=Path, required=True, help='JSON {"pod": "host:port"}')
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model-dir", type=Path, help="source: HF checkpoint directory")
    src.add_argument("--receive", action="store_true", help="receiver: manifest from leader")
    p.add_argument("--result", type=Path, required=True, help="where to write the JSON report")
    p.add_argument("--chunk-bytes", type=int, default=NodeOptions.chunk_bytes)
    p.add_argument("--depth", type=int, default=NodeOptions.depth)
    p.add_argument("--rate-mbit", type=float, default=None, help="cap this node's send rate")
    p.add_argument("--deadline-s", type=float, default=NodeOptions.deadline_s)
    p.add_argument("--ready-timeout-s", type=float, default=NodeOptions.ready_timeout_s)
    p.add_argument("--stall-timeout-s", type=float, default=NodeOptions.stall_timeout_s)
    p.add_argument("--linger-s", type=float, default=NodeOptions.linger_s)
    p.add_argument(
        "--corrupt-block",
        type=int,
        action="append",
        default=[],
        help="fault injection: send this block once with a flipped bit",
    )
    p.add_argument(
        "--common-start",
        action="store_true",
        help="start a chain once every node is ready, as a binomial plan (a benchmark's "
        "one origin); by default each chain node starts as it is ready",
    )
    p.add_argument("--log-level", default=os.environ.get("CASCADE_LOG_LEVEL", "INFO"))
    return p.parse_args(argv)


def load_spec(path: Path) -> ScalePlanSpec:
    doc = json.loads(path.read_text())
    return ScalePlanSpec.model_validate(doc.get("spec", doc))


def write_result(path: Path, result: NodeResult) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(result.model_dump_json(indent=2) + "\n")
    tmp.replace(path)


async def amain(args: argparse.Namespace) -> NodeResult:
    spec = load_spec(args.plan)
    peers: dict[str, str] = json.loads(args.peers.read_text())
    host, port = parse_address(args.listen)
    options = NodeOptions(
        chunk_bytes=args.chunk_bytes,
        depth=args.depth,
        stall_timeout_s=args.stall_timeout_s,
        ready_timeout_s=args.ready_timeout_s,
        deadline_s=args.deadline_s,
        linger_s=args.linger_s,
        rate_bytes_per_s=args.rate_mbit * 1e6 / 8 if args.rate_mbit else None,
        corrupt_blocks=tuple(args.corrupt_block),
        common_start=args.common_start,
        key=key_from_env(),  # $CASCADE_PEER_TOKEN, as in a worker; unset: open
    )
    store = None
    if args.model_dir is not None:
        from cascade_worker.blocks.store import BlockStore

        store = BlockStore.from_model_dir(args.model_dir, len(spec.blocks))
    node = MulticastNode(
        spec,
        args.me,
        store,
        host=host,
        port=port,
        options=options,
        on_result=lambda r: write_result(args.result, r),
    )
    return await node.run(peers)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    use_notifier_thread()  # a one-loop process
    logging.basicConfig(
        level=args.log_level.upper(),
        format=f"%(asctime)s {args.me} %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("ucx").setLevel(logging.WARNING)
    try:
        result = asyncio.run(amain(args))
    except Exception as exc:
        log.exception("node %s failed", args.me)
        write_result(
            args.result,
            NodeResult(node=args.me, role="unknown", strategy="unknown", error=repr(exc)),
        )
        return 1
    finally:
        stop_notifier()
    write_result(args.result, result)
    return 2 if result.missing else 0


if __name__ == "__main__":
    sys.exit(main())
