"""What one request's client has received, and the request that continues it elsewhere.

A request's chunks may come from several backends in turn: a retry before the first
token starts over, and a stream that moves once it has tokens (its worker handed it
back while draining, or its connection broke) continues where the client is. The
gateway knows exactly what that is: the token ids and text of every chunk it passed
on (the worker streams ids with the text, and text may lag ids by a held-back partial
character or stop-string prefix). `Delivered` keeps that; `attempt_request` builds the
next attempt: a fresh request id (a retry never collides with a dying original) and,
when tokens were delivered, `resume` with them, so the next worker prefills prompt +
those tokens and streams only what follows (cascade_protocol.generate). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cascade_protocol.generate import GenerateChunk, GenerateRequest, Resume


@dataclass
class Delivered:
    token_ids: list[int] = field(default_factory=list)
    text_chars: int = 0  # characters, as Python counts them (JSON keeps code points)

    def add(self, chunk: GenerateChunk) -> None:
        self.token_ids += chunk.token_ids
        self.text_chars += len(chunk.text)


def attempt_request(request: GenerateRequest, attempt: int, sent: Delivered) -> GenerateRequest:
    """The request for attempt number `attempt` (0 = the first) after `sent` went out."""
    if attempt == 0:
        return request
    update: dict[str, object] = {"request_id": f"{request.request_id}-{attempt}"}
    if sent.token_ids:
        update["resume"] = Resume(token_ids=list(sent.token_ids), text_chars=sent.text_chars)
    return request.model_copy(update=update)
