"""OpenAI-style errors: one exception type the handlers turn into one body shape.

OpenAI clients read ``{"error": {"message", "type", "param", "code"}}`` and pick their
exception class from the HTTP status (400 BadRequestError, 404 NotFoundError, 429
RateLimitError, 5xx InternalServerError), so every refusal the gateway makes is an
``OpenAIError`` carrying both. ``param`` names the offending request field, so a client
sees which of its arguments to fix. Pure: no aiohttp here.
"""

from __future__ import annotations

from typing import Any

INVALID_REQUEST = "invalid_request_error"


class OpenAIError(Exception):
    """A request the gateway answers with an error status and an OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = INVALID_REQUEST,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return error_body(self.message, type=self.type, param=self.param, code=self.code)


def error_body(
    message: str, *, type: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


def model_not_found(model: str) -> OpenAIError:
    return OpenAIError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


def queue_full(request_class: str, limit: int, retry_after: int) -> OpenAIError:
    return OpenAIError(
        429,
        f"The {request_class} request queue is full ({limit} requests waiting); "
        f"retry after {retry_after} s.",
        type="rate_limit_exceeded",
        code="rate_limit_exceeded",
        headers={"Retry-After": str(retry_after)},
    )


def draining() -> OpenAIError:
    return OpenAIError(
        503,
        "This gateway is shutting down and takes no new requests; retry to reach another.",
        type="service_unavailable",
        code="draining",
        headers={"Retry-After": "1"},
    )


def no_backend(seconds: float, *, held: bool = False) -> OpenAIError:
    """The deadline passed while queued; ``held``: no model server was ready at all."""
    message = (
        f"No model server was ready to take the request within {seconds:g} s: the "
        "deployment has no ready instance (scaled to zero, or its first instance is still "
        "starting). Retry later."
        if held
        else f"No model server could take the request within {seconds:g} s."
    )
    return OpenAIError(
        503,
        message,
        type="service_unavailable",
        code="no_backend",
        headers={"Retry-After": "1"},
    )


def timed_out(seconds: float) -> OpenAIError:
    return OpenAIError(
        504,
        f"The request did not finish within the gateway's {seconds:g} s deadline.",
        type="timeout",
        code="timeout",
    )


def upstream_failed(detail: str, attempts: int) -> OpenAIError:
    return OpenAIError(
        502,
        f"The model server failed the request ({detail}) after {attempts} attempt(s).",
        type="server_error",
        code="upstream_failed",
    )


def stream_broken(detail: str) -> OpenAIError:
    """For the SSE error event when a backend fails after tokens reached the client."""
    return OpenAIError(
        502,
        f"The model server failed after part of the response was streamed ({detail}); "
        "the output is incomplete.",
        type="server_error",
        code="upstream_failed",
    )
