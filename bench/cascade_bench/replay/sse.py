"""Parsing the gateway's server-sent events into what the benchmark times.

An OpenAI completion stream is `data: {json}` lines: chunks with `choices[i].text`, a final
chunk with `usage` when `stream_options.include_usage` is set, then `data: [DONE]`. A
server that fails mid-stream sends `data: {"error": {...}}` instead; an error whose code
is 429 is a rejection (overload), not a failure of the request itself. Comments, `event:`
lines and blank lines carry nothing timed and are skipped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    text: str = ""  # generated text in this chunk ('' when none): non-empty = a token arrival
    completion_tokens: int | None = None  # from `usage`: the exact output length
    prompt_tokens: int | None = None  # from `usage`: what the server counted
    error: str | None = None  # 'stream: ...' for error payloads and unparseable data
    rejected: bool = False  # the error is a 429 (overload): counted as a rejection
    done: bool = False  # `[DONE]`: the stream ended normally


def _error(payload: Any) -> Event:
    err = payload if isinstance(payload, dict) else {"message": payload}
    code = err.get("code")
    rejected = str(code) == "429" or err.get("type") in ("rate_limit", "rate_limit_exceeded")
    message = err.get("message") or json.dumps(err)
    return Event(error=f"stream: {message}"[:300], rejected=rejected)


def parse_line(line: bytes | str) -> Event | None:
    """One SSE line to an Event, or None when the line carries no data."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = text.strip()
    if not text.startswith("data:"):
        return None
    data = text[len("data:") :].strip()
    if data == "[DONE]":
        return Event(done=True)
    try:
        obj = json.loads(data)
    except ValueError:
        return Event(error=f"stream: malformed data line: {data[:200]!r}")
    if not isinstance(obj, dict):
        return Event(error=f"stream: unexpected data: {data[:200]!r}")
    if "error" in obj:
        return _error(obj["error"])
    choices = obj.get("choices") or []
    pieces = (c.get("text") for c in choices if isinstance(c, dict))
    usage = obj.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    return Event(
        text="".join(p for p in pieces if isinstance(p, str)),
        completion_tokens=usage.get("completion_tokens"),
        prompt_tokens=usage.get("prompt_tokens"),
    )
