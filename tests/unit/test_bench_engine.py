"""`cascade bench engine`: its flags and its table (the measuring itself is the bench)."""

from __future__ import annotations

from typing import Any

import pytest

from cascade_bench.enginebench.measure import prompt_ids
from cascade_bench.enginebench.run import paired_ratio, table
from cascade_cli.main import build_parser


def row(path: str, phase: str, size: int, tps: float) -> dict[str, Any]:
    batch, prompt = (size, 16) if phase == "decode" else (1, size)
    return {"path": path, "phase": phase, "batch": batch, "prompt": prompt, "tokens_per_s": tps}


def test_flags_parse_into_the_config_fields() -> None:
    args = build_parser().parse_args(
        ["bench", "engine", "--batches", "1,8", "--prompts", "64", "--paths", "eager,transformers"]
    )
    assert args.batches == (1, 8) and args.prompts == (64,)
    assert args.paths == ("eager", "transformers") and args.rounds == 3
    with pytest.raises(SystemExit):
        build_parser().parse_args(["bench", "engine", "--paths", "eager,vllm"])


def test_table_has_a_column_per_path_and_the_compile_seconds() -> None:
    doc = {
        "threads": 1,
        "loadavg_before": (1.5, 1.0, 1.0),
        "loadavg_after": (2.25, 1.0, 1.0),
        "rows": [
            row("eager", "decode", 16, 1097.4),
            row("transformers", "decode", 16, 1135.0),
            row("eager", "prefill", 512, 3000.0),
        ],
        "compile_s": {
            "cold": 140.0,
            "warm_cache": 20.5,
            "restored_artifacts": 90.25,
            "artifact_load_s": 1.5,
            "artifact_bytes": 3 << 20,
        },
    }
    lines = table(doc).splitlines()  # a document of one thread count, rows without theirs
    head = ["threads", "phase", "batch", "prompt", "eager", "transformers", "eager/hf"]
    assert lines[0].split() == head
    assert lines[1].split() == ["1", "decode", "16", "16", "1097", "1135", "0.97x"]
    assert lines[2].split() == ["1", "prefill", "1", "512", "3000", "-", "-"]
    assert "load 1.50 -> 2.25" in lines[3]
    assert "cold 140.0, warm cache 20.5, restored artifacts 90.2" in lines[4]
    assert "3.0 MiB" in lines[4]


def test_rows_of_several_thread_counts_are_kept_apart() -> None:
    doc = {
        "threads": [1, 2],
        "loadavg_before": (1.0, 1.0, 1.0),
        "loadavg_after": (1.0, 1.0, 1.0),
        "rows": [
            {**row("eager", "decode", 1, 100.0), "threads": 1},
            {**row("transformers", "decode", 1, 80.0), "threads": 1},
            {**row("eager", "decode", 1, 150.0), "threads": 2},
            {**row("transformers", "decode", 1, 160.0), "threads": 2},
        ],
    }
    lines = table(doc).splitlines()
    assert lines[1].split() == ["1", "decode", "1", "16", "100", "80", "1.25x"]
    assert lines[2].split() == ["2", "decode", "1", "16", "150", "160", "0.94x"]
    args = build_parser().parse_args(["bench", "engine", "--model", "/m", "--threads", "1,2"])
    assert args.threads == (1, 2) and str(args.model_dir) == "/m"


def test_prompts_are_distinct_and_inside_the_vocabulary() -> None:
    ids = prompt_ids(4, 32, vocab=100)
    assert len({tuple(p) for p in ids}) == 4
    assert all(4 <= t < 100 for p in ids for t in p)


def test_a_path_is_compared_round_by_round_with_its_spread() -> None:
    hf = [100.0, 80.0, 120.0]
    doc = {
        "threads": [1],
        "loadavg_before": (1.0, 1.0, 1.0),
        "loadavg_after": (1.0, 1.0, 1.0),
        "rows": [
            {**row("eager", "decode", 16, 110.0), "threads": 1,
             **paired_ratio([110.0, 96.0, 120.0], hf)},
            {**row("transformers", "decode", 16, 100.0), "threads": 1,
             **paired_ratio(hf, hf)},
        ],
    }  # fmt: skip
    pair = doc["rows"][0]["vs_transformers"]
    assert pair == {"median": pytest.approx(1.1), "min": 1.0, "max": pytest.approx(1.2)}
    assert "vs_transformers" not in doc["rows"][1]
    assert table(doc).splitlines()[1].split()[-2:] == ["1.10x", "(1.00-1.20)"]
