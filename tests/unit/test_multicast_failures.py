"""Failures during a transfer: a dead hop, a corrupted block, a vanished source, bad peers."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import numpy as np
import pytest
from multicast_harness import BLOCK_BYTES, BLOCKS, FAST, run_plan
from waiting import until

from cascade_worker.blocks.store import BlockStore
from cascade_worker.multicast import MulticastNode
from cascade_worker.multicast.frames import CODEC, BlockHeader, Fetch
from cascade_worker.multicast.result import NodeResult
from cascade_worker.transport import EndpointPool, TransportError
from cascade_worker.transport.frames import HEADER

pytestmark = [pytest.mark.timeout(90), pytest.mark.ucx]

# The source sends at 4 MB/s so a 2 MB model takes ~0.5 s: long enough to fail mid-way.
SLOW_SOURCE = replace(FAST, rate_bytes_per_s=4e6)


def test_receiver_killed_mid_chain_downstream_reattaches_and_completes() -> None:
    async def kill_t0(nodes: dict[str, MulticastNode], stores: dict[str, BlockStore]) -> None:
        await until(lambda: len(stores["t0"].held()) >= 2, 10, "t0 to hold 2 blocks")
        await nodes["t0"].kill()

    run = run_plan(
        "chain", 1, 3, {"s0": SLOW_SOURCE, "t0": FAST, "t1": FAST, "t2": FAST}, scenario=kill_t0
    )
    assert isinstance(run.results["t0"], asyncio.CancelledError)
    assert not run.stores["t0"].complete()
    for t in ("t1", "t2"):
        run.assert_complete(t)
    assert run.result("t1").abandoned_peers == ["t0"]  # re-attached to the source
    assert run.result("t2").abandoned_peers == []  # its upstream t1 never went away


def test_corrupted_block_is_rejected_refetched_and_never_installed() -> None:
    opts = {"s0": FAST, "t0": replace(FAST, corrupt_blocks=(3,)), "t1": FAST, "t2": FAST}
    rejected: list[int] = []

    async def watch(nodes: dict[str, MulticastNode], stores: dict[str, BlockStore]) -> None:
        real = stores["t1"].check

        def spy(index: int) -> str | None:
            problem = real(index)
            if problem is not None:
                rejected.append(index)
                assert not stores["t1"].has(index)
            return problem

        stores["t1"].check = spy  # type: ignore[method-assign]

    run = run_plan("chain", 1, 3, opts, scenario=watch)
    for t in ("t0", "t1", "t2"):
        run.assert_complete(t)  # byte-identical to the source, all checksums verified
    assert rejected == [3]
    assert run.result("t1").refetched == [3]
    assert run.result("t0").refetched == []  # the forwarder itself held a good copy


def test_transfer_that_cannot_finish_reports_missing_blocks_in_bounded_time() -> None:
    t_kill: list[float] = []
    reported: dict[str, float] = {}

    async def kill_source(nodes: dict[str, MulticastNode], stores: dict[str, BlockStore]) -> None:
        def note(r: NodeResult) -> None:
            reported.setdefault(r.node, time.monotonic())

        for pod in ("t0", "t1", "t2"):
            nodes[pod].on_result = note
        await until(lambda: len(stores["t0"].held()) >= 2, 10, "t0 to hold 2 blocks")
        t_kill.append(time.monotonic())
        await nodes["s0"].kill()

    opts = {p: FAST for p in ("t0", "t1", "t2")} | {"s0": SLOW_SOURCE}
    run = run_plan("chain", 1, 3, opts, scenario=kill_source)
    for t in ("t0", "t1", "t2"):
        r = run.result(t)
        assert r.missing and r.complete_s is None
        assert r.missing == run.stores[t].missing()
        assert set(r.missing) | set(r.block_arrivals) == set(range(BLOCKS))
        assert "s0" in r.abandoned_peers
        # A dead peer is noticed through its connection, long before any stall timeout.
        assert reported[t] - t_kill[0] < 3.0 < FAST.stall_timeout_s


def test_binomial_sender_dies_receivers_fall_back_to_the_source() -> None:
    async def kill_t0(nodes: dict[str, MulticastNode], stores: dict[str, BlockStore]) -> None:
        await until(lambda: len(stores["t0"].held()) >= 1, 10, "t0 to hold a block")
        await nodes["t0"].kill()

    opts = {"s0": SLOW_SOURCE} | {f"t{i}": FAST for i in range(7)}
    run = run_plan("binomial", 1, 7, opts, scenario=kill_t0)
    for t in (f"t{i}" for i in range(1, 7)):
        run.assert_complete(t)
    assert any("t0" in run.result(f"t{i}").abandoned_peers for i in range(1, 7))


def test_node_survives_garbage_and_out_of_turn_frames() -> None:
    async def attack(nodes: dict[str, MulticastNode], stores: dict[str, BlockStore]) -> None:
        victim = nodes["t0"]
        await until(lambda: victim.server._listener is not None, 10, "the victim to listen")
        pool = EndpointPool(CODEC, connect_timeout_s=2)
        try:
            address = victim.server.address
            raw = await pool.get(address, "raw")
            await raw.send_raw(b"\x00garbage" * 50)
            json_bad = await pool.get(address, "json")
            await json_bad.send_raw(HEADER.pack(5))
            await json_bad.send_raw(b"{{{{{")
            wrong = await pool.get(address, "wrong")  # a data frame where a request belongs
            await wrong.send_frame(BlockHeader(index=0, nbytes=1, chunk_bytes=1))
            oversize = await pool.get(address, "oversize")  # fetch a block that does not exist
            await oversize.send_frame(Fetch(node="t2", blocks=[999]))
            reply = await oversize.recv_frame(timeout=10)
            assert reply.kind == "unavailable"
            for ep in (raw, json_bad, wrong):
                with pytest.raises(TransportError):
                    await ep.recv_frame(timeout=5)
        finally:
            await pool.close()

    run = run_plan("chain", 1, 3, scenario=attack)
    for t in ("t0", "t1", "t2"):
        run.assert_complete(t)
    node_bytes = BLOCKS * BLOCK_BYTES
    assert run.result("t0").bytes_sent == node_bytes  # it kept forwarding to t1
    assert np.array_equal(run.stores["t2"].buffer(0), run.buffers[0])
    assert isinstance(run.results["s0"], NodeResult)
