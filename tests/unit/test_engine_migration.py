"""A stream resumed on another engine (GenerateRequest.resume) continues with no seam.

The engine's side of migration: given the tokens a client already has and how much of
their text, a fresh engine prefills prompt + those tokens (the recompute path) and
streams only what follows. Greedy output must equal an uninterrupted run token for
token, and the text the client sees, before the seam plus after it, must equal the
uninterrupted text, also where the seam cuts a multi-byte character or a possible
stop-string prefix the first engine was holding back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_harness import PROMPTS, drain, greedy, request, text, token_ids
from pydantic import ValidationError

from cascade_protocol.generate import (
    FinishReason,
    GenerateChunk,
    GenerateRequest,
    Resume,
    SamplingParams,
)
from cascade_worker.engine.core import RequestRejected
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.output import TextStream
from cascade_worker.engine.tokenizer import EngineTokenizer, IncrementalDetokenizer

NEW = 40
MULTIBYTE = "Hello, wörld! 🙂 日本語のテキスト, emoji 👩‍👩‍👧‍👦 and code: def f(x): return x"


@pytest.fixture(scope="module")
def tok(model_dir: Path) -> EngineTokenizer:
    loaded = EngineTokenizer.from_model_dir(model_dir)
    assert loaded is not None
    return loaded


def engine(model_dir: Path) -> LLMEngine:
    return LLMEngine.from_model_dir(model_dir, max_batch=8, max_model_len=128, block_size=4)


def uninterrupted(model_dir: Path, params: SamplingParams) -> dict[str, list[GenerateChunk]]:
    e = engine(model_dir)
    for i, prompt in enumerate(PROMPTS):
        e.add_request(request(str(i), prompt, params))
    return drain(e)


def resumed(base: GenerateRequest, chunks: list[GenerateChunk], k: int) -> GenerateRequest:
    """`base` resumed after the first k chunks (one token each) reached the client."""
    state = Resume(token_ids=token_ids(chunks[:k]), text_chars=len(text(chunks[:k])))
    return base.model_copy(update={"request_id": f"{base.request_id}-r{k}", "resume": state})


def check_resume_at_every_seam(model_dir: Path, params: SamplingParams) -> None:
    ref = uninterrupted(model_dir, params)
    e = engine(model_dir)  # another instance: nothing cached of the first run
    for i, prompt in enumerate(PROMPTS):
        rid = str(i)
        whole = ref[rid]
        for k in range(1, len(whole)):
            e.add_request(resumed(request(rid, prompt, params), whole, k))
    out = drain(e)
    for i in range(len(PROMPTS)):
        rid = str(i)
        whole = ref[rid]
        for k in range(1, len(whole)):
            after = out[f"{rid}-r{k}"]
            assert token_ids(whole[:k]) + token_ids(after) == token_ids(whole), (rid, k)
            assert text(whole[:k]) + text(after) == text(whole), (rid, k)
            last, ref_last = after[-1], whole[-1]
            assert last.finish_reason == ref_last.finish_reason
            assert (last.prompt_tokens, last.completion_tokens) == (
                ref_last.prompt_tokens, ref_last.completion_tokens
            )  # fmt: skip


def test_greedy_resume_equals_an_uninterrupted_run_at_every_seam(model_dir: Path) -> None:
    check_resume_at_every_seam(model_dir, greedy(NEW))


def test_resume_keeps_stop_strings_across_the_seam(model_dir: Path) -> None:
    """A stop string picked from the middle of each output: seams before it, inside its
    held-back prefix and right at it all end the stream where the uninterrupted run
    does, with the same text."""
    free = uninterrupted(model_dir, greedy(NEW))
    stops = []
    for rid in map(str, range(len(PROMPTS))):
        whole = text(free[rid])
        middle = len(whole) // 2
        stops.append(whole[middle : middle + 3])
    params = greedy(NEW, stop=[s for s in stops if s.strip()])
    ref = uninterrupted(model_dir, params)
    assert any(c[-1].finish_reason == FinishReason.STOP for c in ref.values())
    check_resume_at_every_seam(model_dir, params)


def test_resumed_tokens_count_against_max_tokens_and_are_prefilled(model_dir: Path) -> None:
    e = engine(model_dir)
    base = request("a", PROMPTS[0], greedy(8))
    ref = engine(model_dir)
    ref.add_request(base)
    whole = drain(ref)["a"]
    e.add_request(resumed(base, whole, 5))
    assert e.scheduler.seq(0).num_tokens == whole[-1].prompt_tokens + 5
    after = drain(e)["a-r5"]
    assert len(token_ids(after)) == 3 and after[-1].completion_tokens == 8


def text_chunks(tok: EngineTokenizer, ids: list[int], stops: list[str], k: int) -> list[str]:
    """Text deltas of `ids` as an engine streams them (one take per token), the stream
    moving to a fresh TextStream after k tokens (k = 0: no move)."""
    prompt = tok.encode("prompt:")
    stream = TextStream(IncrementalDetokenizer(tok, prompt), stops)
    out: list[str] = []
    for i, token in enumerate(ids):
        if i == k and k > 0:
            stream = TextStream(IncrementalDetokenizer(tok, prompt), stops)
            stream.resume(ids[:k], sum(len(t) for t in out))
        stopped = stream.add(token)
        out.append(stream.take(final=stopped or i == len(ids) - 1))
        if stopped:
            break
    return out


@pytest.mark.parametrize("stops", [[], ["語の"], ["👩‍👩"], ["def f", "x)"]])
def test_text_continues_across_a_seam_inside_characters_and_stop_prefixes(
    tok: EngineTokenizer, stops: list[str]
) -> None:
    ids = tok.encode(MULTIBYTE, add_special_tokens=False)
    whole = text_chunks(tok, ids, stops, 0)
    assert any(t == "" for t in whole)  # something was held back mid-stream
    for k in range(1, len(ids)):
        assert "".join(text_chunks(tok, ids, stops, k)) == "".join(whole), k


def test_invalid_resumes_are_refused(model_dir: Path) -> None:
    with pytest.raises(ValidationError, match="fewer than max_tokens"):
        GenerateRequest(
            request_id="x", prompt="hi", params=greedy(2), resume=Resume(token_ids=[5, 6])
        )
    with pytest.raises(ValidationError):
        Resume(token_ids=[])
    e = engine(model_dir)
    base = request("x", "hi", greedy(8))
    cases = [
        (Resume(token_ids=[5, 100_000]), "outside the vocabulary"),
        (Resume(token_ids=[300], text_chars=50), "text_chars 50 is past"),
    ]
    for state, message in cases:
        with pytest.raises(RequestRejected, match=message):
            e.add_request(base.model_copy(update={"resume": state}))
    assert not e.has_work()
