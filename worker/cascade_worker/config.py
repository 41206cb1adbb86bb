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
from dataclasses import dataclass, field

from cascade_api.constants import DATA_PORT, NODE_EMULATION_ENV, PIPELINE_PORT, WORKER_PORT
from cascade_api.modeldeployment import Dtype
from cascade_protocol.cli_args import (
    add_serving_args,
    int_at_least,
    parse_flag,
    parse_mbit,
    parse_port,
    parse_seconds,
)
from cascade_protocol.peer_auth import GENERATE_TOKEN_ENV, PeerKey, key_from_env
from cascade_protocol.status import WorkerRole
from cascade_worker.config_batch import (
    DEFAULT_ADAPTIVE_BATCH_TICK_SECONDS,
    DEFAULT_BATCH_ITL_SLO_MS,
    DEFAULT_INTERACTIVE_ITL_SLO_MS,
    add_batch_control_args,
)

# Blocks a model is cut into when a load request names no count.
DEFAULT_BLOCKS = 4
# How long in-flight generations may take to finish at shutdown or on a drain request,
# after the readiness grace; with the default grace it fits a 30 s termination grace.
DEFAULT_REQUEST_DRAIN_SECONDS = 20.0
# Requests waiting for a batch slot before 429 (the gateway then tries another backend).
# The gateway sends a backend at most its batch plus a small slack, so this is only ever
# reached by direct clients or a burst while the batch cap drops; it bounds the memory
# of waiting requests (each at most a 1 MiB body) at a few hundred MiB.
DEFAULT_QUEUE_LIMIT = 256


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
    # UCX port of the pipeline stage this worker may serve as (0 = any free port: tests).
    pipeline_port: int = PIPELINE_PORT
    # Blocks per model when a load request does not say ($CASCADE_BLOCKS).
    blocks: int = DEFAULT_BLOCKS
    # Read checkpoints at most this fast, Mbit/s ($CASCADE_STORAGE_MBIT; the dev cluster
    # sets it so loading from storage costs what S3/NFS would); None = unlimited.
    storage_mbit: float | None = None
    # A host copy ($CASCADE_ROLE=host-copy): holds the model's blocks in host memory and
    # sends them to plans; runs no engine, is ready once it holds the whole model.
    host_copy: bool = False
    # Load $CASCADE_MODEL_PATH and start an engine at start-up ($CASCADE_SERVE=1).
    serve_on_start: bool = False
    # Start idle and unready until weights arrive and an engine serves them
    # ($CASCADE_SERVE=await): a scale-up target the operator streams weights to, which
    # must not read the model's storage and must not count as Ready before it serves.
    await_weights: bool = False
    # Engine bounds when a serve request does not say; None = the engine's default.
    max_batch: int | None = None
    max_model_len: int | None = None
    # Prompt tokens one engine step prefills beside its decodes ($CASCADE_PREFILL_TOKENS_PER_STEP,
    # the ModelDeployment's engine.maxPrefillTokensPerStep); None = the engine's default.
    prefill_tokens_per_step: int | None = None
    # Most requests waiting for a batch slot before 429 (0 = no limit): the gateway holds
    # the real queues, so a worker's queue stays short and its wait visible to routing.
    queue_limit: int = DEFAULT_QUEUE_LIMIT
    # Where the engine runs: the ModelDeployment's engine.device ($CASCADE_DEVICE: auto,
    # cuda, cuda:N, cpu; empty = auto) until the worker's start settles it to a torch
    # device name (engine/device.py).
    device: str = ""
    # GPUs the pod was given ($CASCADE_GPUS, the instance's gpus): auto means CUDA then.
    gpus: int = 0
    # The node plays its GPUs with CPU quotas ($CASCADE_NODE_EMULATION, the dev cluster's
    # node agent sets it): a GPU pod without CUDA computes on the CPU instead of failing.
    node_emulation: bool = False
    # Weight/activation dtype ("bfloat16", ...); "auto" = the checkpoint's ($CASCADE_DTYPE).
    dtype: str = "auto"
    # The model name in load reports ($CASCADE_SERVED_NAME, set by the operator).
    served_name: str = ""
    # Wait for in-flight generations at shutdown/drain before aborting them.
    request_drain_seconds: float = DEFAULT_REQUEST_DRAIN_SECONDS
    # Chiron's local autoscaler moves the engine's batch cap within [1, max batch]
    # ($CASCADE_ADAPTIVE_BATCH, from the ModelDeployment's engine.adaptiveBatch).
    adaptive_batch: bool = False
    adaptive_batch_tick_seconds: float = DEFAULT_ADAPTIVE_BATCH_TICK_SECONDS
    # ITL SLOs per request class, ms: the autoscaler's latency bound (the tightest of
    # the classes running). From the ModelDeployment's spec.slo.
    interactive_itl_slo_ms: int = DEFAULT_INTERACTIVE_ITL_SLO_MS
    batch_itl_slo_ms: int = DEFAULT_BATCH_ITL_SLO_MS
    # Restore materialized start-up state offered with the weights, and carry it
    # ($CASCADE_MATERIALIZATION, the ModelDeployment's materialization.enabled).
    materialization: bool = False
    # torch.compile the engine's layers ($CASCADE_COMPILE; off: eager, faster on CPU).
    compile: bool = False
    # A profile Job's run ($CASCADE_ROLE=materialize): profile once, write, exit.
    materialize_once: bool = False
    # The pinned model digest ($CASCADE_MODEL_DIGEST, spec.model.digest): a checkpoint
    # or a plan of another model is refused. "": no pin.
    model_digest_pin: str = ""
    # The deployment's peer token ($CASCADE_PEER_TOKEN, from the Secret the operator
    # makes): peers without it are refused (access/http_auth.py). None: open (tests, local runs).
    peer_key: PeerKey | None = field(default=None, repr=False)
    # The gateway's token ($CASCADE_GENERATE_TOKEN): generate and load, not control.
    generate_key: PeerKey | None = field(default=None, repr=False)


parse_blocks = int_at_least(1, "block count")
parse_count = int_at_least(1, "count")  # batch size, context length
parse_limit = int_at_least(0, "limit")  # 0 = no limit


def parse_dtype(value: str) -> str:
    """argparse type for a ModelDeployment's engine.dtype."""
    try:
        return str(Dtype(value))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not one of {', '.join(Dtype)}: {value!r}") from exc


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cascade-worker",
        description="Cascade worker: serves one model's layers on one GPU pod "
        "(health, metrics, status, the weight-transfer control API and /v1/generate).",
    )
    add_serving_args(parser, env, port_env="CASCADE_WORKER_PORT", default_port=WORKER_PORT)
    parser.add_argument(
        "--data-port",
        type=parse_port,
        default=env.get("CASCADE_DATA_PORT", str(DATA_PORT)),
        help=f"multicast (UCX) port (env CASCADE_DATA_PORT, default {DATA_PORT})",
    )
    parser.add_argument(
        "--pipeline-port",
        type=parse_port,
        default=env.get("CASCADE_PIPELINE_PORT", str(PIPELINE_PORT)),
        help=f"pipeline stage (UCX) port (env CASCADE_PIPELINE_PORT, default {PIPELINE_PORT})",
    )
    parser.add_argument(
        "--role",
        choices=[str(r) for r in WorkerRole],
        default=env.get("CASCADE_ROLE") or str(WorkerRole.INSTANCE),
        help="instance (serves), host-copy (holds and sends the model's blocks only) or "
        "materialize (a profile Job: records start-up state beside the weights, exits; "
        "env CASCADE_ROLE)",
    )
    parser.add_argument(
        "--blocks",
        type=parse_blocks,
        default=env.get("CASCADE_BLOCKS", str(DEFAULT_BLOCKS)),
        help=f"blocks per model for load (env CASCADE_BLOCKS, default {DEFAULT_BLOCKS})",
    )
    parser.add_argument(
        "--storage-mbit",
        type=parse_mbit,
        default=env.get("CASCADE_STORAGE_MBIT") or None,
        help="read checkpoints at most this fast, Mbit/s, to emulate model storage "
        "(env CASCADE_STORAGE_MBIT; default: unlimited)",
    )
    add_engine_args(parser, env)
    return parser


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


def load_config(argv: Sequence[str], env: Mapping[str, str]) -> WorkerConfig:
    """Parse flags (defaults from ``env``); exits with a usage error on bad values."""
    parser = build_parser(env)
    args = parser.parse_args(list(argv))
    serve = args.serve_on_start
    raw_serve = env.get("CASCADE_SERVE", "")
    await_weights = serve is None and raw_serve.strip().lower() == "await"
    if serve is None:
        try:
            serve = False if await_weights else parse_flag(raw_serve)
        except argparse.ArgumentTypeError as exc:
            parser.error(f"CASCADE_SERVE: {exc}")
    if args.role != WorkerRole.INSTANCE and (serve or await_weights):
        parser.error(
            f"a {args.role} runs no engine: leave --serve-on-start and CASCADE_SERVE unset"
        )
    return WorkerConfig(
        host=args.host,
        port=args.port,
        model_uri=env.get("CASCADE_MODEL_URI", ""),
        deployment=env.get("CASCADE_DEPLOYMENT", ""),
        pod_name=env.get("POD_NAME") or socket.gethostname(),
        drain_seconds=args.drain_seconds,
        model_path=env.get("CASCADE_MODEL_PATH", ""),
        data_port=args.data_port,
        pipeline_port=args.pipeline_port,
        blocks=args.blocks,
        storage_mbit=args.storage_mbit,
        host_copy=args.role == WorkerRole.HOST_COPY,
        serve_on_start=serve,
        await_weights=await_weights,
        max_batch=args.max_batch,
        max_model_len=args.max_model_len,
        prefill_tokens_per_step=args.prefill_tokens_per_step,
        queue_limit=args.queue_limit,
        device=args.device,
        gpus=args.gpus,
        node_emulation=env.get(NODE_EMULATION_ENV, "").strip().lower() in ("1", "true"),
        dtype=args.dtype,
        served_name=env.get("CASCADE_SERVED_NAME", ""),
        request_drain_seconds=args.request_drain_seconds,
        adaptive_batch=args.adaptive_batch,
        adaptive_batch_tick_seconds=args.adaptive_batch_tick_seconds,
        interactive_itl_slo_ms=args.interactive_itl_slo_ms,
        batch_itl_slo_ms=args.batch_itl_slo_ms,
        materialization=args.materialization,
        compile=args.compile,
        materialize_once=args.role == WorkerRole.MATERIALIZE,
        model_digest_pin=env.get("CASCADE_MODEL_DIGEST", "").strip(),
        peer_key=key_from_env(env),
        generate_key=key_from_env(env, GENERATE_TOKEN_ENV),
    )
