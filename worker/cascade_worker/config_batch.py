"""The local autoscaler's flags (Chiron Algorithm 1: the batch cap follows the SLOs)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from cascade_api.modeldeployment import BatchSlo, InteractiveSlo
from cascade_protocol.cli_args import int_at_least, parse_flag, parse_positive_seconds

# The local autoscaler (serving/batch_control.py): its tick, and the ITL SLOs it steers
# by when the operator passes none (the ModelDeployment's own defaults).
DEFAULT_ADAPTIVE_BATCH_TICK_SECONDS = 0.5
DEFAULT_INTERACTIVE_ITL_SLO_MS = InteractiveSlo().itl_ms
DEFAULT_BATCH_ITL_SLO_MS = BatchSlo().itl_ms

parse_ms = int_at_least(1, "number of milliseconds")


def add_batch_control_args(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """The local autoscaler's flags (Chiron Algorithm 1: the batch cap follows the SLOs)."""
    parser.add_argument(
        "--adaptive-batch",
        type=parse_flag,
        default=env.get("CASCADE_ADAPTIVE_BATCH") or "off",
        metavar="on|off",
        help="move the batch cap within [1, --max-batch] by ITL and throughput "
        "backpressure (env CASCADE_ADAPTIVE_BATCH, default off)",
    )
    tick = DEFAULT_ADAPTIVE_BATCH_TICK_SECONDS
    parser.add_argument(
        "--adaptive-batch-tick-seconds",
        type=parse_positive_seconds,
        default=env.get("CASCADE_ADAPTIVE_BATCH_TICK_SECONDS") or str(tick),
        help=f"the local autoscaler's window (env CASCADE_ADAPTIVE_BATCH_TICK_SECONDS, "
        f"default {tick})",
    )
    for name, default in (
        ("interactive", DEFAULT_INTERACTIVE_ITL_SLO_MS),
        ("batch", DEFAULT_BATCH_ITL_SLO_MS),
    ):
        var = f"CASCADE_{name.upper()}_ITL_SLO_MS"
        parser.add_argument(
            f"--{name}-itl-slo-ms",
            type=parse_ms,
            default=env.get(var) or str(default),
            help=f"inter-token latency SLO of {name} requests, ms (env {var}, default {default})",
        )
