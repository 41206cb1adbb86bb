"""Gateway configuration: command-line flags over the environment the operator sets.

The operator runs one gateway per ModelDeployment and tells it, through the environment,
which model name it serves (what clients put in the OpenAI ``model`` field). Pure: no
I/O, unit-tested with plain dicts.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cascade_api.constants import GATEWAY_PORT
from cascade_worker.config import add_serving_args


@dataclass(frozen=True)
class GatewayConfig:
    """Everything the gateway process needs to start."""

    # Address to listen on: $POD_IP inside a pod, 0.0.0.0 elsewhere.
    host: str
    # OpenAI API port (0 = any free port, for tests).
    port: int
    # The model id listed by /v1/models; empty when the operator has not set one.
    model_name: str
    # Name of the ModelDeployment this gateway fronts; a metrics label.
    deployment: str
    # Seconds between readiness turning 503 on SIGTERM and the listener closing.
    drain_seconds: float


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cascade-gateway",
        description="Cascade gateway: OpenAI-compatible front for one ModelDeployment "
        "(this release: model listing, probes and metrics; no request routing yet).",
    )
    add_serving_args(parser, env, port_env="CASCADE_GATEWAY_PORT", default_port=GATEWAY_PORT)
    return parser


def load_config(argv: Sequence[str], env: Mapping[str, str]) -> GatewayConfig:
    """Parse flags (defaults from ``env``); exits with a usage error on bad values."""
    args = build_parser(env).parse_args(list(argv))
    return GatewayConfig(
        host=args.host,
        port=args.port,
        model_name=env.get("CASCADE_MODEL_NAME", ""),
        deployment=env.get("CASCADE_DEPLOYMENT", ""),
        drain_seconds=args.drain_seconds,
    )
