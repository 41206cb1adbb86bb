"""The head's driver without stages (the one-process baseline of the measurements)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_harness import make_model

from cascade_worker.engine.engine import LLMEngine
from cascade_worker.pipeline.head import generate, main, synthetic_requests


def test_synthetic_requests_are_reproducible() -> None:
    a = synthetic_requests(4, 16, 8, vocab=512, seed=3)
    assert a == synthetic_requests(4, 16, 8, vocab=512, seed=3)
    assert a != synthetic_requests(4, 16, 8, vocab=512, seed=4)
    for r in a:
        assert r.prompt_token_ids is not None and 8 <= len(r.prompt_token_ids) <= 16
        assert r.params.temperature == 0 and r.params.max_tokens == 8


def test_head_without_stages_runs_the_whole_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # main() sets it by default; the UCX tests' child interpreters inherit os.environ.
    monkeypatch.setenv("UCXPY_ENABLE_PYTHON_FUTURE", "0")
    model = make_model(tmp_path / "m")
    out = tmp_path / "report.json"
    argv = ["--model-dir", str(model), "--layers", "0:4", "--requests", "3"]
    assert main([*argv, "--max-tokens", "5", "--prompt-tokens", "12", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == report
    assert report["stages"] == 1 and report["tokens"] == 15 and report["errors"] == {}
    engine = LLMEngine.from_model_dir(model, max_model_len=18)
    expected = generate(engine, synthetic_requests(3, 12, 5, engine.config.vocab))
    assert report["outputs"] == expected["outputs"]
    with pytest.raises(SystemExit):
        main(["--model-dir", str(model), "--layers", "1:4"])
