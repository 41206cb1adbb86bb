"""Gateway configuration: command-line flags over the environment the operator sets.

The operator runs one gateway per ModelDeployment and tells it, through the environment,
which model name it serves (what clients put in the OpenAI ``model`` field) and how to
find its workers: ``CASCADE_DISCOVERY=kubernetes`` with ``CASCADE_DEPLOYMENT`` and
``POD_NAMESPACE`` lists the deployment's worker pods; ``CASCADE_BACKENDS`` (or
``--backend``) names worker URLs directly, which is what tests and `cascade dev` use.
Queue bounds, the request deadline, retry attempts and migrations are flags too, so load tests can
tighten them. The per-class TTFT SLOs (the ModelDeployment's ``spec.slo``, passed by
the operator) set each queued batch request's deadline in the load report; the
keep-alive interval is how often a held stream gets an SSE comment; the stall bound how
long a backend may make no progress on its streams before they move (stalls.py). Pure: no I/O,
unit-tested with plain dicts.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cascade_api.constants import GATEWAY_PORT
from cascade_protocol.cli_args import (
    add_serving_args,
    int_at_least,
    parse_positive_seconds,
    parse_seconds,
)
from cascade_protocol.generate import RequestClass
from cascade_protocol.peer_auth import GENERATE_TOKEN_ENV
from cascade_protocol.queue_order import QueueOrder

DISCOVERY_STATIC = "static"
DISCOVERY_KUBERNETES = "kubernetes"

DEFAULT_INTERACTIVE_QUEUE = 256
DEFAULT_BATCH_QUEUE = 4096
DEFAULT_REQUEST_TIMEOUT = 300.0
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_MAX_MIGRATIONS = 3
DEFAULT_BACKEND_SLACK = 2
DEFAULT_POLL_SECONDS = 1.0
DEFAULT_DISCOVERY_SECONDS = 2.0
# The API's defaults for spec.slo.{interactive,batch}.ttftMs.
DEFAULT_INTERACTIVE_TTFT_SLO_MS = 1000
DEFAULT_BATCH_TTFT_SLO_MS = 60_000
# Below every common proxy idle timeout (nginx and cloud load balancers: 30-60 s or more).
DEFAULT_KEEPALIVE_SECONDS = 5.0
# A step takes well under a second and a load poll comes every second: five seconds with
# neither a chunk nor a step on any stream of a backend is a hang, not a slow step.
DEFAULT_STALL_SECONDS = 5.0


@dataclass(frozen=True)
class GatewayConfig:
    """Everything the gateway process needs to start."""

    # Address to listen on: $POD_IP inside a pod, 0.0.0.0 elsewhere.
    host: str
    # OpenAI API port (0 = any free port, for tests).
    port: int
    # The model id listed by /v1/models; empty when the operator has not set one (then
    # any model name the workers report is accepted).
    model_name: str
    # Name of the ModelDeployment this gateway fronts; a metrics label and, with
    # kubernetes discovery, the worker pods' cascade.dev/deployment label value.
    deployment: str
    # Seconds between readiness turning 503 on SIGTERM and the listener closing.
    drain_seconds: float
    # Worker base URLs given statically (--backend / $CASCADE_BACKENDS).
    backends: tuple[str, ...] = ()
    # "static" (only `backends`) or "kubernetes" (plus the deployment's worker pods).
    discovery: str = DISCOVERY_STATIC
    # Namespace to list worker pods in ($POD_NAMESPACE, set by the downward API).
    namespace: str = "default"
    # Requests allowed to wait per class; one more answers 429 (the client backs off
    # instead of the gateway holding unbounded memory and latency).
    interactive_queue: int = DEFAULT_INTERACTIVE_QUEUE
    batch_queue: int = DEFAULT_BATCH_QUEUE
    # Bound on a request's whole life (queueing, retries, generation).
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    # Backends tried per request before giving up (failures before the first token).
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    # Times one request may move to another backend once it has tokens, or because its
    # backend handed it back (a draining worker's MIGRATE); past it the request fails.
    max_migrations: int = DEFAULT_MAX_MIGRATIONS
    # In-flight requests a backend may hold beyond its max_batch: a few queued at the
    # worker keep its batch full between our dispatches.
    backend_slack: int = DEFAULT_BACKEND_SLACK
    # Seconds between GET /v1/load polls of each backend.
    poll_seconds: float = DEFAULT_POLL_SECONDS
    # Seconds between worker pod listings (kubernetes discovery).
    discovery_seconds: float = DEFAULT_DISCOVERY_SECONDS
    # Seconds a full queue tells clients to wait (Retry-After).
    retry_after: int = 1
    # Time-to-first-token SLOs per class (ms): a queued request's deadline in /v1/load.
    interactive_ttft_slo_ms: int = DEFAULT_INTERACTIVE_TTFT_SLO_MS
    batch_ttft_slo_ms: int = DEFAULT_BATCH_TTFT_SLO_MS
    # Seconds without a byte after which a waiting stream gets an SSE comment
    # (": keep-alive"), its headers sent first if need be, so proxies keep it open.
    keepalive_seconds: float = DEFAULT_KEEPALIVE_SECONDS
    # Seconds a backend may make no progress on any of its streams, while others are
    # healthy, before its streams resume elsewhere (stalls.py); 0: never.
    stall_seconds: float = DEFAULT_STALL_SECONDS
    # How a class's queue is ordered (protocol.queue_order): on time first, or FIFO.
    queue_order: QueueOrder = QueueOrder.ON_TIME_FIRST
    # The deployment's generate token ($CASCADE_GENERATE_TOKEN, from the operator's
    # Secret): the gateway's requests to workers carry it (peer_auth). "": none.
    peer_token: str = field(default="", repr=False)

    def ttft_slo_s(self, request_class: RequestClass) -> float:
        if request_class is RequestClass.INTERACTIVE:
            return self.interactive_ttft_slo_ms / 1000.0
        return self.batch_ttft_slo_ms / 1000.0


def parse_backends(value: str) -> list[str]:
    """Comma-separated worker URLs; a bare host:port gets http://, trailing / dropped."""
    urls = []
    for part in value.split(","):
        url = part.strip().rstrip("/")
        if not url:
            continue
        if "://" not in url:
            url = "http://" + url
        urls.append(url)
    return urls


_queue_size = int_at_least(0, "queue size")
_attempts = int_at_least(1, "attempt count")
_migrations = int_at_least(0, "migration count")
_slack = int_at_least(0, "slack")
_slo_ms = int_at_least(1, "SLO in milliseconds")


def build_parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cascade-gateway",
        description="Cascade gateway: OpenAI-compatible front for one ModelDeployment; "
        "queues requests per class and routes them to the least-loaded worker.",
    )
    add_serving_args(parser, env, port_env="CASCADE_GATEWAY_PORT", default_port=GATEWAY_PORT)
    add = parser.add_argument
    add(
        "--backend",
        action="append",
        default=[],
        help="worker base URL, repeatable (also $CASCADE_BACKENDS, comma-separated)",
    )
    add(
        "--discovery",
        choices=[DISCOVERY_STATIC, DISCOVERY_KUBERNETES],
        default=env.get("CASCADE_DISCOVERY", DISCOVERY_STATIC),
        help="also find worker pods through the Kubernetes API (env CASCADE_DISCOVERY)",
    )
    for name, env_name, default, kind, what in (
        ("--interactive-queue", "CASCADE_INTERACTIVE_QUEUE", DEFAULT_INTERACTIVE_QUEUE, _queue_size,
         "interactive requests allowed to wait"),
        ("--batch-queue", "CASCADE_BATCH_QUEUE", DEFAULT_BATCH_QUEUE, _queue_size,
         "batch requests allowed to wait"),
        ("--request-timeout", "CASCADE_REQUEST_TIMEOUT", DEFAULT_REQUEST_TIMEOUT,
         parse_positive_seconds, "seconds a request may take in all"),
        ("--max-attempts", "CASCADE_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS, _attempts,
         "backends tried per request"),
        ("--max-migrations", "CASCADE_MAX_MIGRATIONS", DEFAULT_MAX_MIGRATIONS, _migrations,
         "times a request may be resumed on another backend"),
        ("--backend-slack", "CASCADE_BACKEND_SLACK", DEFAULT_BACKEND_SLACK, _slack,
         "in-flight requests per backend beyond its max_batch"),
        ("--poll-seconds", "CASCADE_POLL_SECONDS", DEFAULT_POLL_SECONDS, parse_positive_seconds,
         "seconds between backend load polls"),
        ("--discovery-seconds", "CASCADE_DISCOVERY_SECONDS", DEFAULT_DISCOVERY_SECONDS,
         parse_positive_seconds, "seconds between worker pod listings"),
        ("--interactive-ttft-slo-ms", "CASCADE_INTERACTIVE_TTFT_SLO_MS",
         DEFAULT_INTERACTIVE_TTFT_SLO_MS, _slo_ms, "interactive time-to-first-token SLO, ms"),
        ("--batch-ttft-slo-ms", "CASCADE_BATCH_TTFT_SLO_MS", DEFAULT_BATCH_TTFT_SLO_MS,
         _slo_ms, "batch time-to-first-token SLO, ms (queued batch deadlines)"),
        ("--keepalive-seconds", "CASCADE_KEEPALIVE_SECONDS", DEFAULT_KEEPALIVE_SECONDS,
         parse_positive_seconds, "seconds of silence before a waiting stream gets an SSE comment"),
        ("--stall-seconds", "CASCADE_STALL_SECONDS", DEFAULT_STALL_SECONDS, parse_seconds,
         "seconds a backend may make no progress on its streams before they move (0: never)"),
    ):  # fmt: skip
        add(
            name,
            type=kind,
            default=env.get(env_name, str(default)),
            help=f"{what} (env {env_name}, default {default})",
        )
    add(
        "--queue-order",
        choices=[str(o) for o in QueueOrder],
        default=env.get("CASCADE_QUEUE_ORDER") or str(QueueOrder.ON_TIME_FIRST),
        help="OnTimeFirst (late requests step behind on-time ones) or FIFO "
        "(env CASCADE_QUEUE_ORDER, default OnTimeFirst)",
    )
    return parser


def load_config(argv: Sequence[str], env: Mapping[str, str]) -> GatewayConfig:
    """Parse flags (defaults from ``env``); exits with a usage error on bad values."""
    parser = build_parser(env)
    args = parser.parse_args(list(argv))
    backends = parse_backends(env.get("CASCADE_BACKENDS", ""))
    for flag in args.backend:
        backends += parse_backends(flag)
    deployment = env.get("CASCADE_DEPLOYMENT", "")
    if args.discovery == DISCOVERY_KUBERNETES and not deployment:
        parser.error("--discovery kubernetes needs $CASCADE_DEPLOYMENT")
    return GatewayConfig(
        host=args.host,
        port=args.port,
        model_name=env.get("CASCADE_MODEL_NAME", ""),
        deployment=deployment,
        drain_seconds=args.drain_seconds,
        backends=tuple(dict.fromkeys(backends)),
        discovery=args.discovery,
        namespace=env.get("POD_NAMESPACE", "default"),
        interactive_queue=args.interactive_queue,
        batch_queue=args.batch_queue,
        request_timeout=args.request_timeout,
        max_attempts=args.max_attempts,
        max_migrations=args.max_migrations,
        backend_slack=args.backend_slack,
        poll_seconds=args.poll_seconds,
        discovery_seconds=args.discovery_seconds,
        interactive_ttft_slo_ms=args.interactive_ttft_slo_ms,
        batch_ttft_slo_ms=args.batch_ttft_slo_ms,
        keepalive_seconds=args.keepalive_seconds,
        stall_seconds=args.stall_seconds,
        queue_order=QueueOrder(args.queue_order),
        peer_token=env.get(GENERATE_TOKEN_ENV, "").strip(),
    )
