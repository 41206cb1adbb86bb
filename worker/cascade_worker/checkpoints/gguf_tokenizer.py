"""The GGUF's key/value metadata, and the tokenizer rebuilt from it (gguf_import.py).

llama.cpp keeps the vocabulary, merges, token types and the name of its pre-tokenizer
in the file; the HF tokenizer those stand for is rebuilt with the `tokenizers` library,
and written where transformers and the engine read it. Only byte-level BPE converts
exactly; anything else is refused naming the key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

from cascade_worker.checkpoints.files import write_json

# GGUF token types (llama.cpp's llama_token_type): control tokens are special.
_CONTROL, _USER_DEFINED = 3, 4
# tokenizer.ggml.pre -> the HF pre-tokenizer llama.cpp's pre type stands for.
_PRE_TOKENIZERS: dict[str, Callable[[], pre_tokenizers.PreTokenizer]] = {
    "gpt2": lambda: pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    "smollm": lambda: pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    ),
}


class GGUFMetadata:
    """Typed access to a GGUF's key/value fields, with errors that name the key."""

    def __init__(self, reader: Any) -> None:
        self._fields = reader.fields
        self.arch = str(self.get("general.architecture"))
        if self.arch != "llama":
            raise ValueError(
                f"general.architecture: {self.arch!r} is not supported by `model import` "
                "(llama only)"
            )

    def get(self, key: str, default: Any = ...) -> Any:
        field = self._fields.get(key)
        if field is None:
            if default is ...:
                raise ValueError(f"GGUF metadata lacks {key}")
            return default
        return field.contents()

    def model(self, key: str, default: Any = ...) -> Any:
        return self.get(f"{self.arch}.{key}", default)


def build_tokenizer(meta: GGUFMetadata) -> Tokenizer:
    """Byte-level BPE from tokenizer.ggml.{tokens,merges,token_type,pre}."""
    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise ValueError(
            f"tokenizer.ggml.model: {kind!r} is not supported (byte-level BPE 'gpt2' only)"
        )
    pre = meta.get("tokenizer.ggml.pre", "gpt2")
    if pre not in _PRE_TOKENIZERS:
        raise ValueError(
            f"tokenizer.ggml.pre: {pre!r} is not supported; supported: {sorted(_PRE_TOKENIZERS)}"
        )
    tokens: list[str] = list(meta.get("tokenizer.ggml.tokens"))
    types = list(meta.get("tokenizer.ggml.token_type", [1] * len(tokens)))
    merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges")]
    unk = meta.get("tokenizer.ggml.unknown_token_id", None)
    tok = Tokenizer(
        models.BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=merges,
            unk_token=None if unk is None else tokens[unk],
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    tok.pre_tokenizer = _PRE_TOKENIZERS[pre]()
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens(
        [
            AddedToken(t, special=kind_ == _CONTROL, normalized=False)
            for t, kind_ in zip(tokens, types, strict=True)
            if kind_ in (_CONTROL, _USER_DEFINED)
        ]
    )
    bos = meta.get("tokenizer.ggml.bos_token_id", None)
    if meta.get("tokenizer.ggml.add_bos_token", False) and bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{tokens[bos]} $A",
            pair=f"{tokens[bos]} $A {tokens[bos]} $B",
            special_tokens=[(tokens[bos], bos)],
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def write_tokenizer(out_dir: Path, tok: Tokenizer, meta: GGUFMetadata) -> None:
    """tokenizer.json, tokenizer_config.json and chat_template.jinja (transformers 5's
    layout: the template beside the tokenizer, not inside its config)."""
    tok.save(str(out_dir / "tokenizer.json"))
    tokens: list[str] = list(meta.get("tokenizer.ggml.tokens"))

    def token(key: str) -> str | None:
        index = meta.get(f"tokenizer.ggml.{key}_token_id", None)
        return None if index is None else tokens[index]

    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": token("bos"),
        "eos_token": token("eos"),
        "pad_token": token("padding"),
        "unk_token": token("unknown"),
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(meta.model("context_length")),
    }
    write_json(out_dir / "tokenizer_config.json", config)
    template = meta.get("tokenizer.chat_template", None)
    jinja = out_dir / "chat_template.jinja"
    if template:
        jinja.write_text(str(template), encoding="utf-8")
    else:
        jinja.unlink(missing_ok=True)
