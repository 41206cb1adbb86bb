"""Worker configuration: command-line flags over the environment the operator sets.

The operator describes a worker pod through environment variables (which model, which
deployment) and the kubelet/node agent adds the pod's identity (POD_NAME, POD_IP). This
module turns those into one typed, validated value; it does no I/O so it is unit-tested
with plain dicts.
"""

from __future__ import annotations

import argparse
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cascade_api.constants import DATA_PORT, WORKER_PORT

DEFAULT_DRAIN_SECONDS = 2.0
# Blocks a model is cut into when a load request names no count.
DEFAULT_BLOCKS = 4


@dataclass(frozen=True)
class WorkerConfig:
    """Everything the worker process needs to start."""

    # Address to listen on: $POD_IP inside a pod, 0.0.0.0 elsewhere.
    host: str
    # Control/health port; the operator's probes and the gateway use it (0 = any free port).
    port: int
    # Where the weights come from (e.g. "file:///models/llama" or "hf://org/name").
    model_uri: str
    # Name of the ModelDeployment this pod serves; a metrics label.
    deployment: str
    # This pod's name, reported in /v1/status so plans can refer to it.
    pod_name: str
    # Seconds between readiness turning 503 on SIGTERM and the listener closing.
    drain_seconds: float
    # Local checkpoint directory ($CASCADE_MODEL_PATH); what `load` packs by default.
    model_path: str = ""
    # UCX port of the multicast executor (0 = any free port; tests run several workers).
    data_port: int = DATA_PORT
    # Blocks per model when a load request does not say ($CASCADE_BLOCKS).
    blocks: int = DEFAULT_BLOCKS


def bind_host(env: Mapping[str, str]) -> str:
    """Pods bind to their own IP when the node agent/kubelet tells them; else everywhere."""
    return env.get("POD_IP") or "0.0.0.0"


def parse_port(value: str) -> int:
    """argparse type for a TCP port; 0 means "any free port" (tests)."""
    try:
        port = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from exc
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {port}")
    return port


def parse_seconds(value: str) -> float:
    """argparse type for a non-negative duration in seconds."""
    try:
        seconds = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from exc
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {seconds}")
    return seconds


def parse_blocks(value: str) -> int:
    """argparse type for a positive block count."""
    try:
        blocks = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a block count: {value!r}") from exc
    if blocks < 1:
        raise argparse.ArgumentTypeError(f"need at least one block: {blocks}")
    return blocks


def add_serving_args(
    parser: argparse.ArgumentParser, env: Mapping[str, str], *, port_env: str, default_port: int
) -> None:
    """--port/--host/--drain-seconds, shared by every Cascade pod process."""
    parser.add_argument(
        "--port",
        type=parse_port,
        default=env.get(port_env, str(default_port)),
        help=f"listen port (env {port_env}, default {default_port})",
    )
    parser.add_argument(
        "--host",
        default=bind_host(env),
        help="listen address (default: $POD_IP, else 0.0.0.0)",
    )
    parser.add_argument(
        "--drain-seconds",
        type=parse_seconds,
        default=env.get("CASCADE_DRAIN_SECONDS", str(DEFAULT_DRAIN_SECONDS)),
        help="grace between SIGTERM (readiness 503) and exit "
        f"(env CASCADE_DRAIN_SECONDS, default {DEFAULT_DRAIN_SECONDS})",
    )


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cascade-worker",
        description="Cascade worker: serves one model's layers on one GPU pod "
        "(this release: health, metrics, status and the weight-transfer control API).",
    )
    add_serving_args(parser, env, port_env="CASCADE_WORKER_PORT", default_port=WORKER_PORT)
    parser.add_argument(
        "--data-port",
        type=parse_port,
        default=env.get("CASCADE_DATA_PORT", str(DATA_PORT)),
        help=f"multicast (UCX) port (env CASCADE_DATA_PORT, default {DATA_PORT})",
    )
    parser.add_argument(
        "--blocks",
        type=parse_blocks,
        default=env.get("CASCADE_BLOCKS", str(DEFAULT_BLOCKS)),
        help=f"blocks per model for load (env CASCADE_BLOCKS, default {DEFAULT_BLOCKS})",
    )
    return parser


def load_config(argv: Sequence[str], env: Mapping[str, str]) -> WorkerConfig:
    """Parse flags (defaults from ``env``); exits with a usage error on bad values."""
    args = build_parser(env).parse_args(list(argv))
    return WorkerConfig(
        host=args.host,
        port=args.port,
        model_uri=env.get("CASCADE_MODEL_URI", ""),
        deployment=env.get("CASCADE_DEPLOYMENT", ""),
        pod_name=env.get("POD_NAME") or socket.gethostname(),
        drain_seconds=args.drain_seconds,
        model_path=env.get("CASCADE_MODEL_PATH", ""),
        data_port=args.data_port,
        blocks=args.blocks,
    )
