"""The `torch.distributed` broadcast baseline: one gloo rank per node, rank 0 the source.

MASTER is the source pod's address, so the rendezvous store and every rank's connections
go over the shaped fabric like Cascade's. Gloo picks the pod's only NIC (eth0).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from cascade_bench.pods import BenchPod
from cascade_bench.procs import Launch
from cascade_bench.steps import StepDir, fresh_port


def gloo_launches(
    step: StepDir,
    source: BenchPod,
    receivers: Sequence[BenchPod],
    blocks_json: Path,
    model_dir: Path,
    timeout: float,
) -> list[Launch]:
    ranks = [source, *receivers]
    port = fresh_port()
    out = []
    for rank, pod in enumerate(ranks):
        argv = [
            sys.executable,
            "-m",
            "cascade_bench.gloo_node",
            "--name", pod.name,
            "--rank", str(rank),
            "--world", str(len(ranks)),
            "--master", f"{source.net.ip}:{port}",
            "--blocks", str(blocks_json),
            "--ready", str(step.ready(pod.name)),
            "--start", str(step.start),
            "--result", str(step.result(pod.name)),
            "--timeout", str(int(timeout)),
        ]  # fmt: skip
        if rank == 0:
            argv += ["--model-dir", str(model_dir)]
        env = {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1", "POD_IP": pod.net.ip}
        out.append(
            Launch(
                name=pod.name,
                argv=argv,
                log=step.log(pod.name),
                prefix=pod.prefix,
                env=env,
                ready_file=step.ready(pod.name),
            )
        )
    return out
