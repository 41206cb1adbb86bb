"""The serving layer's flags: the engine's bounds, device and dtype, the local
autoscaler's (Chiron Algorithm 1: the batch cap follows the SLOs), what to restore and
how long to drain. The operator sets their environment variables (builders.py)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from cascade_api.modeldeployment import BatchSlo, Dtype, InteractiveSlo
from cascade_protocol.cli_args import (
    int_at_least,
    parse_flag,
    parse_positive_seconds,
    parse_seconds,
)

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


# How long in-flight generations may take to finish at shutdown or on a drain request,
# after the readiness grace; with the default grace it fits a 30 s termination grace.
DEFAULT_REQUEST_DRAIN_SECONDS = 20.0
# Requests waiting for a batch slot before 429 (the gateway then tries another backend).
# The gateway sends a backend at most its batch plus a small slack, so this is only ever
# reached by direct clients or a burst while the batch cap drops; it bounds the memory
# of waiting requests (each at most a 1 MiB body) at a few hundred MiB.
DEFAULT_QUEUE_LIMIT = 256

parse_count = int_at_least(1, "count")  # batch size, context length
parse_limit = int_at_least(0, "limit")  # 0 = no limit


def parse_dtype(value: str) -> str:
    """argparse type for a ModelDeployment's engine.dtype."""
    try:
        return str(Dtype(value))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not one of {', '.join(Dtype)}: {value!r}") from exc


def add_engine_args(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """Flags of the serving layer; the operator sets their environment variables."""
    parser.add_argument(
        "--serve-on-start",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="load $CASCADE_MODEL_PATH and serve at start (env CASCADE_SERVE=1; "
        "CASCADE_SERVE=await: start idle, unready until weights arrive and it serves)",
    )
    batch = env.get("CASCADE_MAX_BATCH") or env.get("CASCADE_MAX_BATCH_SIZE")
    parser.add_argument(
        "--max-batch",
        type=parse_count,
        default=batch,
        help="running batch bound (env CASCADE_MAX_BATCH or CASCADE_MAX_BATCH_SIZE; "
        "default: the engine's)",
    )
    parser.add_argument(
        "--max-model-len",
        type=parse_count,
        default=env.get("CASCADE_MAX_MODEL_LEN") or None,
        help="context length (env CASCADE_MAX_MODEL_LEN; default: the engine's)",
    )
    parser.add_argument(
        "--prefill-tokens-per-step",
        type=parse_count,
        default=env.get("CASCADE_PREFILL_TOKENS_PER_STEP") or None,
        help="chunked prefill budget: prompt tokens per engine step "
        "(env CASCADE_PREFILL_TOKENS_PER_STEP; default: the engine's)",
    )
    parser.add_argument(
        "--queue-limit",
        type=parse_limit,
        default=env.get("CASCADE_QUEUE_LIMIT") or str(DEFAULT_QUEUE_LIMIT),
        help="waiting requests before 429, 0 = no limit "
        f"(env CASCADE_QUEUE_LIMIT, default {DEFAULT_QUEUE_LIMIT})",
    )
    parser.add_argument(
        "--device",
        default=env.get("CASCADE_DEVICE", ""),
        help="engine device: auto, cuda, cuda:N or cpu (env CASCADE_DEVICE; default auto: "
        "CUDA when the pod was given GPUs, $CASCADE_GPUS)",
    )
    parser.add_argument(
        "--gpus",
        type=parse_limit,
        default=env.get("CASCADE_GPUS") or "0",
        help="GPUs the pod was given (env CASCADE_GPUS, set by the operator; default 0)",
    )
    parser.add_argument(
        "--dtype",
        type=parse_dtype,
        default=env.get("CASCADE_DTYPE") or "auto",
        help=f"weight dtype, one of {', '.join(Dtype)} (env CASCADE_DTYPE; "
        "default auto: the checkpoint's)",
    )
    add_batch_control_args(parser, env)
    for flag, var, what in (
        ("materialization", "CASCADE_MATERIALIZATION", "restore materialized start-up state"),
        ("compile", "CASCADE_COMPILE", "torch.compile the engine's layers"),
    ):
        parser.add_argument(
            f"--{flag}", type=parse_flag, default=env.get(var) or "off", metavar="on|off",
            help=f"{what} (env {var}, default off)",
        )  # fmt: skip
    parser.add_argument(
        "--request-drain-seconds",
        type=parse_seconds,
        default=env.get("CASCADE_REQUEST_DRAIN_SECONDS", str(DEFAULT_REQUEST_DRAIN_SECONDS)),
        help="wait for in-flight generations at shutdown before aborting them "
        f"(env CASCADE_REQUEST_DRAIN_SECONDS, default {DEFAULT_REQUEST_DRAIN_SECONDS})",
    )
