"""The node process entry point, as the benchmark runs it: real processes, one killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ports import free_port

from cascade_api.scaleplan import Source, SourceTier
from cascade_planner import plan_spec
from cascade_worker.blocks.store import BlockStore
from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec
from cascade_worker.multicast.local import plan_blocks
from cascade_worker.multicast.node import parse_args

pytestmark = pytest.mark.timeout(120)


def test_cli_arguments() -> None:
    args = parse_args(
        [
            "--plan",
            "p.json",
            "--me",
            "a",
            "--listen",
            "127.0.0.1:1",
            "--peers",
            "x.json",
            "--receive",
            "--result",
            "r.json",
            "--rate-mbit",
            "100",
            "--corrupt-block",
            "2",
        ]
    )
    assert args.receive and args.model_dir is None and args.corrupt_block == [2]
    with pytest.raises(SystemExit):
        parse_args(
            ["--plan", "p", "--me", "a", "--listen", "h:1", "--peers", "x", "--result", "r"]
        )  # neither --model-dir nor --receive


def test_processes_complete_a_chain_after_a_hop_is_killed(tmp_path: Path) -> None:
    model_dir = tmp_path / "model"
    write_checkpoint(
        model_dir, ModelSpec(layers=4, hidden=128, heads=4, kv_heads=2, intermediate=384)
    )
    manifest = BlockStore.from_model_dir(model_dir, 4).manifest
    spec = plan_spec(
        "chain",
        [Source(pod="s0", tier=SourceTier.HOST)],
        ["t0", "t1"],
        plan_blocks(manifest),
        deployment="d",
        model_digest=manifest.digest,
    )
    (tmp_path / "plan.json").write_text(json.dumps({"spec": spec.to_api()}))
    peers = {pod: f"127.0.0.1:{free_port()}" for pod in ("s0", "t0", "t1")}
    (tmp_path / "peers.json").write_text(json.dumps(peers))
    env = dict(os.environ, CASCADE_LOG_LEVEL="INFO")
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for pod in ("t1", "t0", "s0"):  # any start order works
        role = ["--model-dir", str(model_dir)] if pod == "s0" else ["--receive"]
        # The source is slowed to ~1 MB/s so the ~1.7 MB model takes about two seconds.
        rate = ["--rate-mbit", "8"] if pod == "s0" else []
        cmd = [
            sys.executable,
            "-m",
            "cascade_worker.multicast.node",
            "--plan",
            str(tmp_path / "plan.json"),
            "--me",
            pod,
            "--listen",
            peers[pod],
            "--peers",
            str(tmp_path / "peers.json"),
            "--result",
            str(tmp_path / f"{pod}.json"),
            "--stall-timeout-s",
            "10",
            "--deadline-s",
            "60",
            "--linger-s",
            "1",
            *role,
            *rate,
        ]
        log = (tmp_path / f"{pod}.log").open("wb")
        procs[pod] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        t0_log = tmp_path / "t0.log"
        give_up = time.monotonic() + 60
        while b"t0: started" not in t0_log.read_bytes():
            assert time.monotonic() < give_up, t0_log.read_text()
            assert procs["t0"].poll() is None, t0_log.read_text()
            time.sleep(0.05)
        time.sleep(0.5)  # mid-transfer
        procs["t0"].send_signal(signal.SIGKILL)
        codes = {pod: procs[pod].wait(timeout=60) for pod in ("t1", "s0")}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    logs = {pod: (tmp_path / f"{pod}.log").read_text() for pod in procs}
    assert codes == {"t1": 0, "s0": 0}, logs
    t1 = json.loads((tmp_path / "t1.json").read_text())
    assert t1["missing"] == [] and t1["abandoned_peers"] == ["t0"], logs["t1"]
    assert sorted(int(b) for b in t1["block_arrivals"]) == [0, 1, 2, 3]
    assert t1["bytes_received"] >= manifest.total_bytes
    assert t1["complete_s"] == max(t1["block_arrivals"].values())
    source = json.loads((tmp_path / "s0.json").read_text())
    assert source["role"] == "source" and source["tier"] == "host"
