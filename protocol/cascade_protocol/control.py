"""Bodies of the orders a worker's control API takes, and what it answers.

The control API (cascade_worker.control.jobs) is spoken by the operator (dispatch of plan
roles, serve and load orders), by other workers (`fetch`) and by people with curl, so
every body is a pydantic model with camelCase names on the wire and unknown fields are
rejected (a typo must not silently mean "use the default"). Both sides build and parse
these same models, so an order the operator sends is one the worker understands.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer
from pydantic.alias_generators import to_camel

from cascade_api.scaleplan import Block, ScalePlanSpec
from cascade_protocol import limits

# A decoder layer boundary (the worker checks it against the model it holds).
Layer = Annotated[int, Field(ge=0, le=limits.MAX_LAYERS)]
Name = Annotated[str, Field(max_length=limits.MAX_NAME_CHARS)]
Address = Annotated[str, Field(min_length=1, max_length=limits.MAX_NAME_CHARS)]
# Blocks to cut a model into: each becomes a buffer and a plan entry.
BlockCount = Annotated[int, Field(ge=1, le=limits.MAX_MODEL_BLOCKS)]


class Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class LoadRequest(Body):
    """POST /v1/control/load: pack a local checkpoint into held blocks."""

    model_path: str | None = Field(default=None, min_length=1)  # default $CASCADE_MODEL_PATH
    blocks: BlockCount | None = None  # default from the worker's config


class TransferRequest(Body):
    """POST /v1/control/transfer: take this pod's role in a multicast plan."""

    plan: ScalePlanSpec
    # pod -> "host:port" of its data (UCX) listener, every participant
    peers: dict[Name, Name] = Field(max_length=limits.MAX_PLAN_PODS)
    # The deployment's spec.liveScaling: a target serves while its weights arrive (the
    # plan's executionPipelines it belongs to) and on its own once it holds them all.
    live: bool = False
    # ... and its spec.liveScaling.cooperative: a target paired with a source runs the
    # layers it holds of each batch from its first block on (BlitzScale).
    cooperative: bool = False
    # The deployment's spec.multicast.rateMbit as bytes/s: this worker's sending pace.
    send_bytes_per_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @field_serializer("plan")
    def _plan_as_in_the_api(self, plan: ScalePlanSpec) -> dict[str, Any]:
        # The plan travels as the API server holds it (camelCase, no unset optionals).
        return plan.to_api()


class FetchRequest(Body):
    """POST /v1/control/fetch: get the model from one peer worker over a one-hop chain."""

    peer: Address  # "POD_IP[:HTTP_PORT]" of a worker that holds the model
    blocks: BlockCount | None = None  # if the peer must load first


class ServeRequest(Body):
    """POST /v1/control/serve: start an engine on the held model."""

    # Default: the worker's --max-batch / --max-model-len (the KV cache is sized by both).
    max_batch: int | None = Field(default=None, ge=1, le=limits.MAX_BATCH)
    max_model_len: int | None = Field(default=None, ge=1, le=limits.MAX_CONTEXT_TOKENS)
    # Half-open decoder-layer range to run here: the whole model, or [0, a) with `stages`.
    layers: tuple[Layer, Layer] | None = None
    # "host:port" of the pipeline stages running [a, b), ..., [., L), in layer order: with
    # them this worker is a pipeline head.
    stages: list[Address] = Field(default_factory=list, max_length=limits.MAX_LAYERS)


class StageRequest(Body):
    """POST /v1/control/stage: serve layers [a, b) of the held model as a pipeline stage."""

    layers: tuple[Layer, Layer]


class LocalRequest(Body):
    """POST /v1/control/local: a pipeline head that holds the whole model leaves the pipeline."""


class DrainRequest(Body):
    """POST /v1/control/drain: stop admitting, finish in-flight requests, stop the engine."""

    # Longest wait for in-flight requests before they are aborted; default from config.
    timeout_s: float | None = Field(default=None, ge=0, le=limits.MAX_DRAIN_SECONDS)


class Accepted(Body):
    """202 body: what was started; progress shows in GET /v1/status."""

    action: str
    role: str | None = None
    model_digest: str | None = None
    peers: dict[str, str] = Field(default_factory=dict)


class ManifestInfo(Body):
    """GET /v1/control/manifest: what a holder offers, enough to plan a transfer from it."""

    pod: str
    data_port: int
    model_digest: str
    blocks: list[Block]
