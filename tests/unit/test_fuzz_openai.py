"""Property tests of OpenAI request bodies as the gateway parses them: any body is a
`Job` or an `OpenAIError` (400 naming the field, 404 for an unknown model) -- never another
exception -- and every request the gateway accepts is one the worker accepts too (both
validate against the shared limits)."""

from __future__ import annotations

import json
from typing import Any

from fuzz_strategies import EDGE_INTS, fuzz, ints, json_values, junk
from hypothesis import given
from hypothesis import strategies as st

from cascade_gateway.api_request import CLASS_HEADER, Endpoint, Limits, parse_chat, parse_completion
from cascade_gateway.errors import OpenAIError
from cascade_protocol import limits
from cascade_protocol.generate import GenerateRequest
from cascade_worker.serving.api import parse_generate

texts = st.text(max_size=12)
token_lists = st.lists(ints, max_size=6)
part = st.fixed_dictionaries({"type": st.just("text"), "text": texts}) | junk
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "system", "assistant", ""]) | junk},
    optional={"content": texts | st.lists(part, max_size=2) | junk},
)
# Every field the two endpoints read, with values a client might plausibly send, at the
# edges that size allocations (EDGE_INTS), and wrong-typed.
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "model": st.sampled_from(["m", "other", ""]) | junk,
    "prompt": texts | token_lists | st.lists(texts | token_lists, max_size=2) | junk,
    "messages": st.lists(message, max_size=3) | junk,
    "max_tokens": ints | junk,
    "max_completion_tokens": ints | junk,
    "n": st.sampled_from([1, 2, *EDGE_INTS]) | junk,
    "stop": texts | st.lists(texts, max_size=20) | junk,
    "stop_token_ids": token_lists | junk,
    "seed": ints | junk,
    "temperature": st.floats(-1, 3) | junk,
    "top_p": st.floats(-1, 2) | junk,
    "stream": st.booleans() | junk,
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}) | junk,
    "ignore_eos": st.booleans() | junk,
    "request_class": st.sampled_from(["interactive", "batch", "x"]) | junk,
    "response_format": st.just({"type": "text"}) | junk,
    **{name: junk for name in ("echo", "best_of", "logprobs", "suffix", "top_logprobs",
                               "tools", "presence_penalty", "frequency_penalty", "logit_bias")},
}  # fmt: skip
# A valid body with a few fields drawn from the above (or nothing but those fields).
BASE = {"model": "m", "prompt": "hi", "messages": [{"role": "user", "content": "hi"}]}
changes = st.lists(st.sampled_from(sorted(FIELDS)), max_size=4, unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({k: FIELDS[k] for k in keys})
)
bodies = st.tuples(st.sampled_from([BASE, {}]), changes).map(lambda t: t[0] | t[1])
LIMITS = st.builds(
    Limits, models=st.sampled_from([frozenset(), frozenset({"m"})]),
    max_model_len=st.sampled_from([0, 64, limits.MAX_CONTEXT_TOKENS]),
)  # fmt: skip
HEADERS = st.none() | st.sampled_from(["batch", "interactive", "bogus", ""])


def parse_or_refuse(endpoint: Endpoint, body: Any, limits_: Limits, header: str | None) -> None:
    parse = parse_chat if endpoint is Endpoint.CHAT else parse_completion
    try:
        job = parse(body, header, limits_, "req-1")
    except OpenAIError as exc:
        assert exc.status in (400, 404), exc.message
        if isinstance(body, dict):  # the refusal names a field the client sent (or must)
            assert exc.param is not None, exc.message
            root = exc.param.split(".")[0].split("[")[0]
            assert root in FIELDS or exc.param == CLASS_HEADER, exc.param
        return
    assert job.endpoint is endpoint and job.request.params.max_tokens >= 1
    # What the gateway accepts, the worker accepts: no request dies at the second hop.
    again = parse_generate(job.request.model_dump_json().encode())
    detail = "" if isinstance(again, GenerateRequest) else json.loads(again.body)
    assert isinstance(again, GenerateRequest), detail


@fuzz(800)
@given(body=bodies, limits_=LIMITS, header=HEADERS)
def test_completion_bodies(body: dict[str, Any], limits_: Limits, header: str | None) -> None:
    parse_or_refuse(Endpoint.COMPLETIONS, body, limits_, header)


@fuzz(800)
@given(body=bodies, limits_=LIMITS, header=HEADERS)
def test_chat_bodies(body: dict[str, Any], limits_: Limits, header: str | None) -> None:
    parse_or_refuse(Endpoint.CHAT, body, limits_, header)


@fuzz(200)
@given(body=json_values)
def test_any_json(body: Any) -> None:
    for endpoint in Endpoint:
        parse_or_refuse(endpoint, body, Limits(models=frozenset()), None)
