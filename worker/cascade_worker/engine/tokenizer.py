"""The engine's tokenizer: encode prompts, render chat templates, stream text out.

Loaded from the checkpoint's own files (tokenizer.json, tokenizer_config.json, and
chat_template.jinja, where transformers 5 writes the template, over the config's), either
from a model directory or from a packed model's manifest extras, with the `tokenizers`
library alone (no transformers at serving time). Chat templates render with a sandboxed
jinja2 environment configured as transformers does (trim_blocks, lstrip_blocks), and the
rendered text is encoded without adding special tokens again, since templates write the
BOS themselves. `IncrementalDetokenizer` turns a growing list of token ids into text
deltas and never emits half a UTF-8 character (byte-level BPE splits characters).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

CHAT_TEMPLATE_FILE = "chat_template.jinja"
REPLACEMENT = "\ufffd"  # what decoding an incomplete UTF-8 sequence produces


def _token_text(value: Any) -> str | None:
    """tokenizer_config.json writes special tokens as strings or {"content": ...}."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _raise(message: str) -> None:
    raise ValueError(message)


class EngineTokenizer:
    def __init__(
        self,
        tokenizer_json: str,
        tokenizer_config: Mapping[str, Any],
        chat_template: str | None = None,
    ) -> None:
        self._tok = Tokenizer.from_str(tokenizer_json)
        self._has_normalizer = json.loads(tokenizer_json).get("normalizer") is not None
        self.bos_token = _token_text(tokenizer_config.get("bos_token"))
        self.eos_token = _token_text(tokenizer_config.get("eos_token"))
        self.eos_token_id = self._tok.token_to_id(self.eos_token) if self.eos_token else None
        self.chat_template = chat_template or tokenizer_config.get("chat_template")
        if isinstance(self.chat_template, list):  # [{"name": "default", "template": ...}]
            named = {t.get("name"): t.get("template") for t in self.chat_template}
            self.chat_template = named.get("default")
        self._env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self._env.globals["raise_exception"] = _raise

    @classmethod
    def from_extras(cls, extras: Mapping[str, str]) -> EngineTokenizer | None:
        """From a manifest's extras; None when the model has no tokenizer.json."""
        if "tokenizer.json" not in extras:
            return None
        config = json.loads(extras.get("tokenizer_config.json", "{}"))
        return cls(extras["tokenizer.json"], config, extras.get(CHAT_TEMPLATE_FILE))

    @classmethod
    def from_model_dir(cls, model_dir: Path) -> EngineTokenizer | None:
        model_dir = Path(model_dir)
        files = ("tokenizer.json", "tokenizer_config.json", CHAT_TEMPLATE_FILE)
        return cls.from_extras(
            {
                n: (model_dir / n).read_text(encoding="utf-8")
                for n in files
                if (model_dir / n).exists()
            }
        )

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size())

    @functools.cached_property
    def max_token_bytes(self) -> int:
        """The most UTF-8 bytes of text one token covers, so a prompt of B bytes needs at
        least B / this many tokens (the gateway's cheap context check); 0 when unknown.

        Decoded one by one, special tokens included; +1 for a leading space a decoder
        strips (Metaspace). A normalizer may fold several input characters into one, so
        a tokenizer with one has no such bound."""
        if self._has_normalizer:
            return 0
        n = self._tok.get_vocab_size()
        texts = self._tok.decode_batch([[i] for i in range(n)], skip_special_tokens=False)
        return max((len(t.encode("utf-8")) for t in texts), default=0) + 1

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text`. Through `encode_batch`, which releases the GIL (`encode`
        holds it: a 600 KB prompt stopped every other thread, the engine's steps too, for
        0.5 s here and seconds under a pod's CPU quota); the ids are the same."""
        [done] = self._tok.encode_batch([text], add_special_tokens=add_special_tokens)
        return list(done.ids)

    def decode(self, ids: list[int], *, skip_special_tokens: bool = True) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=skip_special_tokens))

    def render_chat(
        self, messages: list[dict[str, str]], add_generation_prompt: bool = True
    ) -> str:
        if not self.chat_template:
            raise ValueError(
                f"this model has no chat template ({CHAT_TEMPLATE_FILE} or tokenizer_config.json)"
            )
        template = self._env.from_string(self.chat_template)
        return template.render(
            messages=messages,
            bos_token=self.bos_token or "",
            eos_token=self.eos_token or "",
            add_generation_prompt=add_generation_prompt,
        )

    def encode_chat(self, messages: list[dict[str, str]]) -> list[int]:
        return self.encode(self.render_chat(messages), add_special_tokens=False)


class IncrementalDetokenizer:
    """Text deltas of a growing token list (vLLM's prefix/read offsets scheme).

    Decoding the window ids[prefix:] against ids[prefix:read] keeps the work per token
    small and lets byte-level merges across token boundaries come out right; a delta that
    ends in U+FFFD (an incomplete character) is held back until more tokens arrive.
    """

    CONTEXT = 6  # tokens decoded before the new ones, for boundary merges

    def __init__(self, tokenizer: EngineTokenizer, prompt_ids: list[int] | None = None) -> None:
        """`prompt_ids`: the tail of the prompt is decoding context, never emitted (so a
        SentencePiece-style decoder keeps the leading space of the first output token)."""
        self._tok = tokenizer
        self.ids: list[int] = list((prompt_ids or [])[-self.CONTEXT :])
        self._prefix = 0  # window start
        self._read = len(self.ids)  # ids before this are emitted (or prompt)

    def add(self, token_id: int) -> str:
        self.ids.append(token_id)
        before = self._tok.decode(self.ids[self._prefix : self._read])
        after = self._tok.decode(self.ids[self._prefix :])
        if len(after) <= len(before) or after.endswith(REPLACEMENT):
            return ""
        self._prefix = max(self._prefix, self._read - self.CONTEXT)
        self._read = len(self.ids)
        return after[len(before) :]

    def flush(self) -> str:
        """Whatever is held back, even an incomplete character (at the end of a request)."""
        before = self._tok.decode(self.ids[self._prefix : self._read])
        after = self._tok.decode(self.ids[self._prefix :])
        self._read = len(self.ids)
        return after[len(before) :] if after.startswith(before) else ""
