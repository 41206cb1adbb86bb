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
from cascade_protocol.cli_args import (
    add_serving_args,
    int_at_least,
    parse_flag,
    parse_mbit,
    parse_port,
)
from cascade_protocol.peer_auth import GENERATE_TOKEN_ENV, PeerKey, key_from_env
from cascade_protocol.status import WorkerRole
from cascade_worker.config_engine import (
    DEFAULT_ADAPTIVE_BATCH_TICK_SECONDS,
    DEFAULT_BATCH_ITL_SLO_MS,
    DEFAULT_INTERACTIVE_ITL_SLO_MS,
    DEFAULT_QUEUE_LIMIT,
    DEFAULT_REQUEST_DRAIN_SECONDS,
    add_engine_args,
)

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
