"""The engine computes what transformers computes (eager attention, float32).

Logits of the whole model and of every split into contiguous stages, chained; greedy
generation token for token with sequences batched, chunked and interleaved; Mistral's
sliding window (shorter than the prompts here). Skipped without transformers.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_harness import PROMPTS, WINDOW, drain, greedy, make_model, request, token_ids

from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.executor import LocalExecutor, split_ranges
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.layers import DECODE_BUCKET_TOKENS, decode_groups

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")

ARCHS = ["llama", "qwen2", "mistral"]
LAYERS = 4
ATOL = 1e-4
NEW_TOKENS = 24


@pytest.fixture(scope="module", params=ARCHS)
def model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    arch = request.param
    path = make_model(tmp_path_factory.mktemp(arch), arch)
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    tok = transformers.AutoTokenizer.from_pretrained(path)
    return arch, path, hf, tok


def hf_logits(hf: Any, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        return hf(torch.tensor([ids])).logits[0]  # type: ignore[no-any-return]


def hf_greedy(hf: Any, ids: list[int], new: int) -> list[int]:
    out = hf.generate(
        torch.tensor([ids]), max_new_tokens=new, do_sample=False, eos_token_id=None, pad_token_id=3
    )
    return [int(t) for t in out[0, len(ids) :]]


def compositions(n: int) -> list[tuple[int, ...]]:
    """Every set of cut points splitting n layers into contiguous stages."""
    return [c for k in range(n) for c in itertools.combinations(range(1, n), k)]


def test_logits_match_for_every_split(model: Any) -> None:
    arch, path, hf, tok = model
    ids = tok(PROMPTS[3])["input_ids"]
    assert len(ids) > 2 * WINDOW  # the window matters for mistral
    expected = hf_logits(hf, ids)
    store = BlockStore.from_model_dir(path, 3)  # stages straddle block boundaries
    config = ModelConfig.from_hf(store.manifest.config)
    cache = CacheConfig(block_size=4, num_blocks=32)
    splits = compositions(LAYERS)
    assert len(splits) == 2 ** (LAYERS - 1)
    for cuts in splits:
        executor = LocalExecutor.load(store, config, cache, cuts=cuts)
        assert [(s.start, s.end) for s in executor.stages] == split_ranges(LAYERS, cuts)
        table = list(range(7, 7 + (len(ids) + 3) // 4))  # not starting at block 0
        batch = StageBatch([0], [0], [len(ids)], [table], torch.tensor(ids), all_logits=True)
        got = executor.execute(batch)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, atol=ATOL, rtol=0, msg=f"{arch} cuts {cuts}")


def test_chunked_prefill_and_mixed_batch_logits(model: Any) -> None:
    """Two sequences in one batch, one mid-prefill, one prefilling from scratch."""
    _, path, hf, tok = model
    a, b = tok(PROMPTS[0])["input_ids"], tok(PROMPTS[3])["input_ids"]
    store = BlockStore.from_model_dir(path, 1)
    config = ModelConfig.from_hf(store.manifest.config)
    executor = LocalExecutor.load(store, config, CacheConfig(4, 64), cuts=(1, 3))
    ta, tb = list(range(20)), list(range(40, 60))  # block tables of 80 positions
    assert max(len(a), len(b)) <= 80
    first = StageBatch([0], [0], [5], [ta[:2]], torch.tensor(a[:5]))
    executor.execute(first)
    rest = a[5:] + b
    batch = StageBatch(
        [0, 1], [5, 0], [len(a) - 5, len(b)], [ta, tb], torch.tensor(rest), all_logits=True
    )
    got = executor.execute(batch)
    torch.testing.assert_close(got[: len(a) - 5], hf_logits(hf, a)[5:], atol=ATOL, rtol=0)
    torch.testing.assert_close(got[len(a) - 5 :], hf_logits(hf, b), atol=ATOL, rtol=0)


def test_decodes_with_contexts_in_different_buckets_match(model: Any) -> None:
    """One step decodes sequences whose contexts fall in three length buckets (separate
    attention calls, `decode_groups`): each row's logits are its own sequence's."""
    _, path, hf, _ = model
    lengths = [5, DECODE_BUCKET_TOKENS + 6, 2 * DECODE_BUCKET_TOKENS + 12]
    seqs = [[4 + (i * 7 + k * 13) % 500 for k in range(n + 1)] for i, n in enumerate(lengths)]
    assert len(decode_groups([0, 1, 2], [len(x) for x in seqs])) == 3
    store = BlockStore.from_model_dir(path, 1)
    config = ModelConfig.from_hf(store.manifest.config)
    executor = LocalExecutor.load(store, config, CacheConfig(4, 128))
    tables = [list(range(i * 40, i * 40 + 40)) for i in range(3)]  # 160 positions each
    for i, ids in enumerate(seqs):  # prefill all but the last token
        executor.execute(StageBatch([i], [0], [len(ids) - 1], [tables[i]], torch.tensor(ids[:-1])))
    step = StageBatch(
        [0, 1, 2],
        [len(x) - 1 for x in seqs],
        [1, 1, 1],
        tables,
        torch.tensor([x[-1] for x in seqs]),
    )
    got = executor.execute(step)
    for i, ids in enumerate(seqs):
        torch.testing.assert_close(got[i], hf_logits(hf, ids)[-1], atol=ATOL, rtol=0)


def test_sliding_window_is_applied(tmp_path: Path) -> None:
    """Mistral's window changes the logits here (so parity above really covers it)."""
    store = BlockStore.from_model_dir(make_model(tmp_path, "mistral", layers=2), 1)
    unwindowed = dict(store.manifest.config, sliding_window=None)
    ids = list(range(10, 10 + 3 * WINDOW))
    batch = StageBatch([0], [0], [len(ids)], [list(range(6))], torch.tensor(ids), all_logits=True)
    got = {}
    for name, raw in (("window", store.manifest.config), ("none", unwindowed)):
        config = ModelConfig.from_hf(raw)
        got[name] = LocalExecutor.load(store, config, CacheConfig(4, 6)).execute(batch)
    same = (got["window"] - got["none"]).abs().amax(dim=-1) < 1e-6
    assert same[:WINDOW].all() and not same[WINDOW:].any()  # differs once the window slides


def test_greedy_generation_matches_hf_batched_and_interleaved(model: Any) -> None:
    arch, path, hf, tok = model
    cuts = (1, 2) if arch == "qwen2" else ()  # one arch through a chain of three stages
    prompts = [tok(p)["input_ids"] for p in PROMPTS]
    expected = [hf_greedy(hf, ids, NEW_TOKENS) for ids in prompts]
    # A small prefill budget chunks the long prompts, so decodes of the early requests
    # share steps with later requests' prefill chunks; the last one arrives mid-decode.
    engine = LLMEngine.from_model_dir(
        path, max_batch=4, max_model_len=128, prefill_budget=6, block_size=4, cuts=cuts
    )
    for i, ids in enumerate(prompts[:3]):
        engine.add_request(request(str(i), ids, greedy(NEW_TOKENS)))
    early = {}
    for _ in range(8):
        for chunk in engine.step():
            early.setdefault(chunk.request_id, []).append(chunk)
    engine.add_request(request("3", prompts[3], greedy(NEW_TOKENS)))
    out = drain(engine)
    for i, want in enumerate(expected):
        got = token_ids(early.get(str(i), []) + out.get(str(i), []))
        assert got == want, f"request {i}"
