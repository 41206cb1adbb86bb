"""The worker protocol client: ``POST /v1/generate`` (NDJSON stream) and ``GET /v1/load``.

Every way a worker can fail one request ends here as one of these exceptions, so the
dispatcher's retry rule stays short:

- ``Rejected``: the worker refused the request itself (a 4xx other than 429, e.g. the
  prompt is over the context length). Retrying elsewhere would fail the same way, so
  its status and OpenAI error body go back to the client unchanged.
- ``Failed``: the backend could not serve it (connection refused or reset, 429 queue
  full, 503 not serving/draining, other 5xx, a stream that ends or turns to garbage
  before its final chunk, a final chunk saying error/abort). Another backend may.
- ``Moved`` (a ``Failed``): nothing failed, the worker is leaving (drain) and handed the
  request back with a MIGRATE chunk; another backend resumes it.
- ``Stalled`` (a ``Failed``): the gateway cut the stream because its backend made no
  progress for the stall bound (stalls.py); another backend resumes it.

Closing the ``generate`` iterator early closes the HTTP response, which is how a client
disconnect cancels the worker's request (the worker aborts on a closed connection).

A backend can also vanish without a word: its node loses power or network, or its pod
is deleted with its address while the worker's last segments (and its FIN) sit in a
shaped NIC's queue. Nothing then arrives on the stream, ever. ``connect_socket`` makes
the kernel notice: TCP keep-alive probes after ``DEAD_PEER_IDLE_S`` of silence, and a
user timeout, so an unanswered connection fails with ``Failed`` after ``DEAD_PEER_S``
and the request resumes elsewhere, instead of hanging until the request deadline.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncGenerator

import aiohttp

from cascade_gateway.stalls import Cut
from cascade_protocol import json_body
from cascade_protocol.generate import FinishReason, GenerateChunk, GenerateRequest
from cascade_protocol.load import LOAD_PATH, LoadReport

# How long a backend is skipped after a failure: a full queue (429) clears fast; a
# broken or draining backend is re-admitted by its next good load poll anyway.
COOL_DOWN_FULL_S = 0.2
COOL_DOWN_FAILED_S = 1.0

# A peer that answers neither data nor keep-alive probes for this long is dead. A
# loaded worker's kernel still ACKs (softirq is outside its CPU quota), so this only
# fires on a vanished host or network; probes: idle 5 s, then every 2 s, 3 tries.
DEAD_PEER_IDLE_S = 5
DEAD_PEER_INTERVAL_S = 2
DEAD_PEER_PROBES = 3
DEAD_PEER_S = DEAD_PEER_IDLE_S + DEAD_PEER_INTERVAL_S * DEAD_PEER_PROBES

AddrInfo = tuple[int, int, int, str, tuple[str, int] | tuple[str, int, int, int]]


class Rejected(Exception):
    """The worker answered a 4xx: pass ``status`` and ``body`` (JSON) to the client."""

    def __init__(self, status: int, body: dict[str, object]) -> None:
        super().__init__(f"worker rejected the request with {status}")
        self.status = status
        self.body = body


class Failed(Exception):
    """This backend failed the request; ``cool_down`` seconds before trying it again."""

    def __init__(self, detail: str, cool_down: float = COOL_DOWN_FAILED_S) -> None:
        super().__init__(detail)
        self.detail = detail
        self.cool_down = cool_down


class Moved(Failed):
    """The worker is leaving and handed the request back (FinishReason.MIGRATE)."""


class Stalled(Failed):
    """The stall watch cut the stream: its backend made no progress (stalls.py)."""


def connect_socket(addr_info: AddrInfo) -> socket.socket:
    """A socket for one backend connection that fails when its peer vanishes (above)."""
    family, type_, proto, _, _ = addr_info
    sock = socket.socket(family=family, type=type_, proto=proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, DEAD_PEER_IDLE_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, DEAD_PEER_INTERVAL_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, DEAD_PEER_PROBES)
    # Bounds unacknowledged data too (a request written to a dead peer), not only probes.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, DEAD_PEER_S * 1000)
    return sock


async def fetch_load(session: aiohttp.ClientSession, url: str, timeout: float) -> LoadReport:
    async with session.get(
        f"{url}{LOAD_PATH}", timeout=aiohttp.ClientTimeout(total=timeout)
    ) as resp:
        resp.raise_for_status()
        return LoadReport.model_validate_json(await resp.read())


async def generate(
    session: aiohttp.ClientSession, url: str, request: GenerateRequest, cut: Cut | None = None
) -> AsyncGenerator[GenerateChunk, None]:
    """Yield the worker's chunks up to and including the final (stop/length) one; `cut`
    lets the stall watch close the stream (``Stalled``)."""
    cut = cut or Cut()
    body = request.model_dump(mode="json", exclude_none=True)
    try:
        async with await cut.open(session.post(f"{url}/v1/generate", json=body)) as resp:
            if resp.status != 200:
                raise _status_error(resp.status, await resp.read())
            async for line in resp.content:
                if not line.strip():
                    continue
                chunk = GenerateChunk.model_validate_json(line)
                if chunk.finish_reason is FinishReason.MIGRATE:
                    raise Moved(f"worker handed the request back: {chunk.error or 'migrate'}")
                if chunk.finish_reason in (FinishReason.ERROR, FinishReason.ABORT):
                    raise Failed(f"worker ended the request: {chunk.error or chunk.finish_reason}")
                yield chunk
                if chunk.finish_reason is not None:
                    return
            raise Failed("worker stream ended before the final chunk")
    except (aiohttp.ClientError, TimeoutError) as exc:
        if cut.reason is not None:
            raise Stalled(cut.reason) from exc
        if not isinstance(exc, aiohttp.ClientError):
            raise
        raise Failed(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
    except ValueError as exc:  # pydantic's ValidationError, aiohttp's "line too long"
        raise Failed(f"worker sent an unreadable chunk: {str(exc)[:200]}") from exc


def _status_error(status: int, raw: bytes) -> Rejected | Failed:
    if 400 <= status < 500 and status != 429:
        return Rejected(status, _error_body(status, raw))
    cool_down = COOL_DOWN_FULL_S if status == 429 else COOL_DOWN_FAILED_S
    message = _error_body(status, raw)["error"]
    detail = message.get("message") if isinstance(message, dict) else None
    return Failed(f"worker answered {status}" + (f": {detail}" if detail else ""), cool_down)


def _error_body(status: int, raw: bytes) -> dict[str, object]:
    """The worker's OpenAI error body as is, or one wrapping whatever it sent."""
    try:
        body = json_body.load(raw)
    except json_body.BodyError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body
    text = raw.decode(errors="replace").strip()[:500] or f"HTTP {status}"
    return {
        "error": {"message": text, "type": "invalid_request_error", "param": None, "code": None}
    }
