"""One request inside the engine: its tokens, sampler, output text and stop rules.

`text_to_ids` tokenizes a request's text (prompt or chat messages) once its byte count
shows it can fit, on any thread (the serving layer runs it off the engine thread);
`prepare_prompt` turns a GenerateRequest into token ids and refuses what can never run
(RequestRejected, with the offending field in `param`); `EngineRequest.accept` applies
a sampled token and decides whether the request is done, in the order a client expects:
stop token ids, then EOS (unless ignore_eos), then stop strings, then length limits.

A resumed request (`GenerateRequest.resume`, a stream moved from another instance)
starts with the resumed tokens as its output: they are prefilled with the prompt,
count against max_tokens, and its text stream continues after the characters the
client already received.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cascade_protocol.generate import FinishReason, GenerateChunk, GenerateRequest
from cascade_worker.engine.core import RequestRejected
from cascade_worker.engine.output import TextStream
from cascade_worker.engine.sampling import SamplerState
from cascade_worker.engine.tokenizer import EngineTokenizer, IncrementalDetokenizer


def prepare_prompt(
    request: GenerateRequest, tokenizer: EngineTokenizer | None, vocab: int, max_model_len: int
) -> list[int]:
    if request.prompt_token_ids is not None:
        ids = list(request.prompt_token_ids)
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise RequestRejected(
                f"token ids {bad[:5]} outside the vocabulary 0..{vocab - 1}", "prompt_token_ids"
            )
    else:
        ids = text_ids(request, tokenizer, max_model_len)
    if not ids:
        raise RequestRejected("the prompt is empty after tokenization", "prompt")
    if len(ids) >= max_model_len:
        raise RequestRejected(
            f"the prompt has {len(ids)} tokens; the context length is {max_model_len}", "prompt"
        )
    if request.resume is not None:
        bad = [t for t in request.resume.token_ids if not 0 <= t < vocab]
        if bad:
            raise RequestRejected(
                f"token ids {bad[:5]} outside the vocabulary 0..{vocab - 1}", "resume.token_ids"
            )
    if len(ids) + request.params.max_tokens > max_model_len:
        raise RequestRejected(
            f"prompt ({len(ids)} tokens) + max_tokens ({request.params.max_tokens}) exceeds "
            f"the context length {max_model_len}",
            "max_tokens",
        )
    return ids


def text_ids(
    request: GenerateRequest, tokenizer: EngineTokenizer | None, max_model_len: int
) -> list[int]:
    """The token ids of the request's text, refused first if its bytes cannot fit."""
    if tokenizer is None:
        raise RequestRejected("this model has no tokenizer; send prompt_token_ids", "prompt")
    _fits_bytes(request, tokenizer, max_model_len)
    return _tokenize(request, tokenizer)


def text_to_ids(
    request: GenerateRequest, tokenizer: EngineTokenizer | None, max_model_len: int
) -> GenerateRequest:
    """The request with its text replaced by its token ids (unchanged if it has ids)."""
    if request.prompt_token_ids is not None:
        return request
    ids = text_ids(request, tokenizer, max_model_len)
    if not ids:
        raise RequestRejected("the prompt is empty after tokenization", "prompt")
    return request.model_copy(update={"prompt": None, "messages": None, "prompt_token_ids": ids})


def _tokenize(request: GenerateRequest, tokenizer: EngineTokenizer) -> list[int]:
    if request.messages is None:
        return tokenizer.encode(request.prompt or "")
    try:
        return tokenizer.encode_chat([m.model_dump() for m in request.messages])
    except Exception as exc:  # template errors (raise_exception, jinja) reach the client
        raise RequestRejected(f"cannot render the chat template: {exc}", "messages") from exc


def _fits_bytes(request: GenerateRequest, tokenizer: EngineTokenizer, max_model_len: int) -> None:
    """Refuse, before tokenizing it, text too long for any tokenization to fit."""
    bound, size = max_model_len * tokenizer.max_token_bytes, request.text_bytes()
    if tokenizer.max_token_bytes and size > bound:
        raise RequestRejected(
            f"the prompt has {size} bytes of text, more than {max_model_len} tokens (the "
            f"context length) can hold ({bound} bytes)",
            request.text_param,
        )


@dataclass
class EngineRequest:
    request: GenerateRequest
    seq_id: int
    prompt_ids: list[int]
    sampler: SamplerState
    text: TextStream
    eos_ids: frozenset[int]
    max_model_len: int
    output_ids: list[int] = field(default_factory=list)
    finish_reason: FinishReason | None = None

    @classmethod
    def create(
        cls,
        request: GenerateRequest,
        seq_id: int,
        prompt_ids: list[int],
        tokenizer: EngineTokenizer | None,
        eos_ids: frozenset[int],
        max_model_len: int,
    ) -> EngineRequest:
        detok = IncrementalDetokenizer(tokenizer, prompt_ids) if tokenizer is not None else None
        text = TextStream(detok, request.params.stop)
        resumed: list[int] = []
        if request.resume is not None:
            resumed = list(request.resume.token_ids)
            try:
                text.resume(resumed, request.resume.text_chars)
            except ValueError as exc:
                raise RequestRejected(f"cannot resume: {exc}", "resume") from exc
        return cls(
            request=request,
            seq_id=seq_id,
            prompt_ids=prompt_ids,
            sampler=SamplerState.from_params(request.params),
            text=text,
            eos_ids=eos_ids,
            max_model_len=max_model_len,
            output_ids=resumed,
        )

    @property
    def num_tokens(self) -> int:
        """Prompt + output: what a prefill (or a recompute) covers."""
        return len(self.prompt_ids) + len(self.output_ids)

    @property
    def request_id(self) -> str:
        return self.request.request_id

    def token_ids(self, start: int, stop: int) -> list[int]:
        """Tokens [start, stop) of prompt + output (what a prefill chunk computes)."""
        n = len(self.prompt_ids)
        return (self.prompt_ids[start:stop] if start < n else []) + self.output_ids[
            max(0, start - n) : max(0, stop - n)
        ]

    def accept(self, token: int) -> GenerateChunk:
        """Append a sampled token, apply the stop rules, return the chunk to stream."""
        params = self.request.params
        self.output_ids.append(token)
        stop_token = token in params.stop_token_ids
        eos = token in self.eos_ids and not params.ignore_eos
        # Stop tokens and EOS end the text before them; only other tokens extend it.
        if stop_token or eos or self.text.add(token):
            self.finish_reason = FinishReason.STOP
        elif len(self.output_ids) >= min(
            params.max_tokens, self.max_model_len - len(self.prompt_ids)
        ):
            self.finish_reason = FinishReason.LENGTH
        return self.chunk([token])

    def chunk(self, token_ids: list[int], error: str | None = None) -> GenerateChunk:
        return GenerateChunk(
            request_id=self.request_id,
            text=self.text.take(final=self.finish_reason is not None),
            token_ids=token_ids,
            finish_reason=self.finish_reason,
            prompt_tokens=len(self.prompt_ids),
            completion_tokens=len(self.output_ids),
            error=error,
        )
