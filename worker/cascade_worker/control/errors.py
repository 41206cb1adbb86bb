"""How the worker refuses a request: a status code and a message naming what is wrong.

The control API (jobs.py) is spoken by the operator, by other workers and by people
with curl; its bodies are the shared protocol's models (cascade_protocol.control). A
refusal is JSON `{"error": ...}`: 400 for a malformed request, naming each offending
field, 409 for one that conflicts with what the worker holds or is doing. Pure: no
aiohttp, no stores.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from cascade_protocol import json_body


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
        doc = json_body.load(raw or b"{}")
    except json_body.BodyError as exc:
        raise RequestError(400, str(exc)) from exc
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
