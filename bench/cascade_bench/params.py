"""What one `cascade bench multicast` invocation measures (the JSON's "params")."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cascade_dev.topology import DEFAULT_MTU

METHODS = ("chain", "binomial", "unicast", "gloo")


@dataclass(frozen=True)
class Params:
    nodes: int = 8
    model_mb: float = 200.0
    nic_mbit: int = 200
    spine_mbit: int | None = None  # None: nodes_per_leaf x NIC (a non-blocking spine)
    nodes_per_leaf: int = 4
    mtu: int = DEFAULT_MTU  # the fabric's (cascade dev up --mtu)
    blocks: int = 16
    k: int = 1
    repeat: int = 1
    methods: tuple[str, ...] = METHODS
    chunk_kb: tuple[int, ...] = ()  # Cascade chunk sizes to try; () = the executor's default
    node_env: tuple[tuple[str, str], ...] = ()  # extra env for Cascade nodes (UCX_* tuning)
    link_mb: float = 100.0
    loopback_mb: float = 256.0
    workdir: Path = Path("/tmp/cascade-bench")
    model_dir: Path | None = None
    state_dir: Path | None = None
    wait_cluster_s: float = 600.0
    ready_timeout_s: float = 300.0
    quiet_wait_s: float = 120.0  # per step: wait this long at most for other load to end

    def __post_init__(self) -> None:
        if self.nodes < 2:
            raise ValueError("--nodes must be >= 2")
        if not 1 <= self.k < self.nodes:
            raise ValueError("--k must be 1 .. nodes-1")
        if self.blocks < 1 or self.repeat < 1:
            raise ValueError("--blocks and --repeat must be >= 1")
        unknown = sorted(set(self.methods) - set(METHODS))
        if unknown:
            raise ValueError(f"unknown methods {unknown}; known: {list(METHODS)}")

    @property
    def spine(self) -> int:
        return (
            self.spine_mbit if self.spine_mbit is not None else self.nodes_per_leaf * self.nic_mbit
        )

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        for key in ("workdir", "model_dir", "state_dir"):
            doc[key] = None if doc[key] is None else str(doc[key])
        doc["methods"] = list(self.methods)
        doc["chunk_kb"] = list(self.chunk_kb)
        doc["node_env"] = dict(self.node_env)
        doc["spine_mbit"] = self.spine
        return doc


def run_timeout(bound_s: float, receivers: int) -> float:
    """Generous: even unicast (receivers x bound) gets twice its ideal plus a minute."""
    return 2 * bound_s * (receivers + 2) + 60
