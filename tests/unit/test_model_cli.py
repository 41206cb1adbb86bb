"""`cascade model init` / `inspect` argument handling (no transformers needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade_cli.main import build_parser, main
from cascade_cli.model import spec_from_args
from cascade_worker.checkpoints.spec import ModelSpec


def _spec(*argv: str) -> ModelSpec:
    return spec_from_args(build_parser().parse_args(["model", "init", "OUT", *argv]))


def test_defaults() -> None:
    spec = _spec()
    assert (spec.arch, spec.layers, spec.hidden, spec.heads, spec.kv_heads) == (
        "llama", 4, 256, 8, 4
    )  # fmt: skip
    assert (spec.intermediate, spec.vocab, spec.dtype) == (704, 1024, "float16")


def test_explicit_and_target() -> None:
    spec = _spec("--arch", "qwen2", "--layers", "3", "--hidden", "128", "--heads", "4",
                 "--kv-heads", "1", "--intermediate", "300", "--vocab", "512", "--dtype",
                 "bfloat16", "--seed", "7")  # fmt: skip
    assert (spec.arch, spec.layers, spec.hidden, spec.heads, spec.kv_heads) == (
        "qwen2", 3, 128, 4, 1
    )  # fmt: skip
    assert (spec.intermediate, spec.vocab, spec.dtype, spec.seed) == (300, 512, "bfloat16", 7)
    sized = _spec("--hidden", "1024", "--heads", "16", "--target-mb", "200")
    assert sized.layers == 9 and sized.kv_heads == 8


def test_init_and_inspect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m"
    argv = ["model", "init", str(out), "--layers", "3", "--hidden", "32", "--heads", "4"]
    assert main([*argv, "--vocab", "300"]) == 0
    assert "wrote" in capsys.readouterr().err
    assert main([*argv, "--vocab", "300"]) == 1  # exists; needs --force
    assert "--force" in capsys.readouterr().err
    before = (out / "model.safetensors").stat().st_mtime_ns
    assert main([*argv, "--vocab", "300", "--if-missing"]) == 0  # idempotent setup
    assert "leaving it" in capsys.readouterr().err
    assert (out / "model.safetensors").stat().st_mtime_ns == before
    assert main(["model", "inspect", str(out), "--blocks", "3"]) == 0
    text = capsys.readouterr().out
    assert "LlamaForCausalLM layers=3" in text and "block 2: layers [2, 3)" in text
    assert main(["model", "inspect", str(out), "--blocks", "2", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [b["layer_end"] for b in doc["blocks"]] == [2, 3]
    assert main(["model", "inspect", str(out), "--blocks", "4"]) == 0  # at most one per layer
    assert "block 2: layers [2, 3)" in (text := capsys.readouterr().out) and "block 3" not in text
