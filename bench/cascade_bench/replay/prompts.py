"""Request bodies whose token counts are exact, whatever the served model's tokenizer.

A text prompt's length depends on the tokenizer; the trace gives lengths in tokens. The
OpenAI completions API also takes a prompt as a list of token ids, so we send ids. They come
from a range every byte-level BPE vocabulary has (by default 4..259, the byte tokens after a
few special ones), and are drawn per request from a generator seeded with the request's
trace index: reproducible, and no two requests share a prefix, so a prefix cache cannot
make the replay look faster than the production load it stands for.

Outputs follow the trace too: `max_tokens` is the scaled generated length and
`ignore_eos` (the vLLM extension the gateway supports) stops the model ending early.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from cascade_bench.replay.scale import BATCH, Planned

CLASS_HEADER = "X-Request-Class"
CLASS_VIA = ("body", "header", "both")  # where the request class is sent


@dataclass(frozen=True)
class TokenRange:
    """Inclusive range of token ids prompts are drawn from."""

    low: int = 4
    high: int = 259

    @classmethod
    def parse(cls, text: str) -> TokenRange:
        """'LOW:HIGH' (inclusive), e.g. '4:259'."""
        low, sep, high = text.partition(":")
        try:
            r = cls(int(low), int(high)) if sep else None
        except ValueError:
            r = None
        if r is None or not 0 <= r.low <= r.high:
            raise ValueError(f"token range must be LOW:HIGH with 0 <= LOW <= HIGH, got {text!r}")
        return r


def prompt_ids(index: int, n: int, ids: TokenRange, seed: int = 0) -> list[int]:
    """`n` token ids for trace request `index`: deterministic, different per request."""
    rng = random.Random(seed * 1_000_003 + index)
    return [rng.randint(ids.low, ids.high) for _ in range(n)]


def request_body(
    p: Planned, model: str, ids: TokenRange, seed: int = 0, class_via: str = "body"
) -> dict[str, Any]:
    """The streaming /v1/completions body for one planned request."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt_ids(p.index, p.prompt_tokens, ids, seed),
        "max_tokens": p.output_tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if p.request_class == BATCH and class_via in ("body", "both"):
        body["request_class"] = BATCH
    return body


def request_headers(p: Planned, class_via: str = "body") -> dict[str, str]:
    """Headers carrying the class when asked to (interactive is the default: sent as nothing)."""
    if p.request_class == BATCH and class_via in ("header", "both"):
        return {CLASS_HEADER: BATCH}
    return {}
