"""The model's own generation defaults, from its generation_config.json.

HF checkpoints say there which tokens end a turn (often several: Llama-3's eos and
end-of-turn) and how the model is meant to be sampled. A request that leaves
temperature, top_p or top_k unset gets the model's value, as vLLM does; the OpenAI
defaults (1.0, 1.0, all tokens) apply where the model names none. A malformed file is
refused with the field it got wrong, at engine start, not at the first request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cascade_protocol.generate import SamplingParams

FILE = "generation_config.json"


@dataclass(frozen=True)
class GenerationConfig:
    eos_token_ids: tuple[int, ...] = ()
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None

    @classmethod
    def from_extras(cls, extras: Mapping[str, str]) -> GenerationConfig:
        text = extras.get(FILE)
        if text is None:
            return cls()
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise ValueError(f"{FILE}: not JSON ({err})") from err
        if not isinstance(doc, dict):
            raise ValueError(f"{FILE}: need a JSON object")
        return cls(
            eos_token_ids=_ids(doc.get("eos_token_id")),
            temperature=_number(doc, "temperature", low=0.0),
            top_p=_number(doc, "top_p", low=0.0, open_low=True, high=1.0),
            top_k=_top_k(doc.get("top_k")),
        )

    def apply(self, params: SamplingParams) -> SamplingParams:
        """`params` with every unset sampling field resolved (model default, else OpenAI's)."""
        resolved = {
            "temperature": _first(params.temperature, self.temperature, 1.0),
            "top_p": _first(params.top_p, self.top_p, 1.0),
            "top_k": _first(params.top_k, self.top_k, 0),
        }
        if all(getattr(params, k) == v for k, v in resolved.items()):
            return params
        return params.model_copy(update=resolved)


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)


def _ids(value: Any) -> tuple[int, ...]:
    values = value if isinstance(value, list) else [] if value is None else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ValueError(
            f"{FILE}: eos_token_id must be a token id or a list of them, got {value!r}"
        )
    return tuple(values)


def _number(
    doc: dict[str, Any], name: str, *, low: float, high: float = 100.0, open_low: bool = False
) -> float | None:
    value = doc.get(name)
    if value is None:
        return None
    bad = isinstance(value, bool) or not isinstance(value, int | float)
    if bad or value > high or (value <= low if open_low else value < low):
        raise ValueError(f"{FILE}: {name} must be a number in range, got {value!r}")
    return float(value)


def _top_k(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{FILE}: top_k must be an integer, got {value!r}")
    return max(value, 0)  # HF and vLLM spell "all tokens" 0 or -1
