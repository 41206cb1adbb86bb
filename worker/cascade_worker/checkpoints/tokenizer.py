"""A tokenizer made locally: byte-level BPE trained on the built-in corpus.

No hub downloads: `transformers.AutoTokenizer` loads the files written here as a
PreTrainedTokenizerFast. Byte-level pre-tokenization and decoding make every string
round-trip exactly; `<s>` is prepended on encode like Llama's tokenizers do. Special
tokens take the first ids (unk 0, bos 1, eos 2, pad 3), as in Llama checkpoints.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from cascade_worker.checkpoints.corpus import corpus_lines
from cascade_worker.checkpoints.files import write_json

UNK, BOS, EOS, PAD = "<unk>", "<s>", "</s>", "<pad>"
SPECIAL_TOKENS = (UNK, BOS, EOS, PAD)
BYTE_ALPHABET = 256
MIN_VOCAB = BYTE_ALPHABET + len(SPECIAL_TOKENS)
DEFAULT_TOKENIZER_VOCAB = 1024

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def build_tokenizer(vocab_size: int = DEFAULT_TOKENIZER_VOCAB) -> Tokenizer:
    """Train a byte-level BPE of at most `vocab_size` tokens (fewer if the corpus runs out)."""
    if vocab_size < MIN_VOCAB:
        raise ValueError(f"tokenizer vocab must be >= {MIN_VOCAB} (bytes + specials)")
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus_lines(), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A",
        pair=f"{BOS} $A {BOS} $B",
        special_tokens=[(BOS, tok.token_to_id(BOS))],
    )
    return tok


def special_ids(tok: Tokenizer) -> dict[str, int]:
    """bos/eos/pad/unk token ids (for config.json and generation_config.json)."""
    ids: dict[str, int] = {}
    for key, token in zip(("unk", "bos", "eos", "pad"), SPECIAL_TOKENS, strict=True):
        token_id = tok.token_to_id(token)
        if token_id is None:
            raise ValueError(f"tokenizer lacks special token {token}")
        ids[key] = int(token_id)
    return ids


def write_tokenizer(out_dir: Path, tok: Tokenizer, model_max_length: int) -> None:
    """tokenizer.json, tokenizer_config.json, special_tokens_map.json in `out_dir`."""
    tok.save(str(out_dir / "tokenizer.json"))
    specials = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "unk_token": UNK}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **specials,
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
        "chat_template": CHAT_TEMPLATE,
    }
    write_json(out_dir / "tokenizer_config.json", config)
    write_json(out_dir / "special_tokens_map.json", specials)
