"""Request and response bodies of the worker's control API, and how bad ones are refused.

The control API (control.py) is spoken by the operator, by other workers (`fetch`) and
by people with curl, so every body is a pydantic model with camelCase names on the wire,
unknown fields are rejected (a typo must not silently mean "use the default"), and a
refusal is JSON naming the offending field. Pure: no aiohttp, no stores.
"""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from cascade_api.scaleplan import Block, ScalePlanSpec


class Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class LoadRequest(Body):
    """POST /v1/control/load: pack a local checkpoint into held blocks."""

    model_path: str | None = Field(default=None, min_length=1)  # default $CASCADE_MODEL_PATH
    blocks: int | None = Field(default=None, ge=1)  # default from the worker's config


class TransferRequest(Body):
    """POST /v1/control/transfer: take this pod's role in a multicast plan."""

    plan: ScalePlanSpec
    peers: dict[str, str]  # pod -> "host:port" of its data (UCX) listener, every participant


class FetchRequest(Body):
    """POST /v1/control/fetch: get the model from one peer worker over a one-hop chain."""

    peer: str = Field(min_length=1)  # "POD_IP[:HTTP_PORT]" of a worker that holds the model
    blocks: int | None = Field(default=None, ge=1)  # if the peer must load first


class ServeRequest(Body):
    """POST /v1/control/serve: start an engine on the held model (serving/control_routes.py)."""

    max_batch: int | None = Field(default=None, ge=1)  # default: the worker's --max-batch
    max_model_len: int | None = Field(default=None, ge=1)  # default: --max-model-len
    # Half-open decoder-layer range to run here: the whole model, or [0, a) with `stages`.
    layers: tuple[int, int] | None = None
    # "host:port" of the pipeline stages running [a, b), ..., [., L), in layer order: with
    # them this worker is a pipeline head (serving/pipeline_routes.py).
    stages: list[str] = Field(default_factory=list)


class StageRequest(Body):
    """POST /v1/control/stage: serve layers [a, b) of the held model as a pipeline stage."""

    layers: tuple[int, int]


class LocalRequest(Body):
    """POST /v1/control/local: a pipeline head that holds the whole model leaves the pipeline."""


class DrainRequest(Body):
    """POST /v1/control/drain: stop admitting, finish in-flight requests, stop the engine."""

    # Longest wait for in-flight requests before they are aborted; default from config.
    timeout_s: float | None = Field(default=None, ge=0)


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


class TransferReport(Body):
    """The last transfer's outcome, as GET /v1/status shows it."""

    role: str
    complete: bool
    missing: list[int] = Field(default_factory=list)
    bytes_received: int = 0
    bytes_sent: int = 0
    complete_s: float | None = None
    error: str | None = None


class RequestError(Exception):
    """A request the worker refuses; `status` is the HTTP code (400 bad input, 409 state)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


M = TypeVar("M", bound=BaseModel)


def parse_body(model: type[M], raw: bytes) -> M:
    """Parse a JSON body into `model`; RequestError(400) naming each bad field."""
    try:
        doc = json.loads(raw or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestError(400, f"body is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise RequestError(400, f"body must be a JSON object, got {type(doc).__name__}")
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise RequestError(400, describe(exc)) from exc


def describe(exc: ValidationError) -> str:
    """`field.path: message; ...` for every error pydantic found."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)
