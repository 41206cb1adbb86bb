"""The batched sampler draws each row from its own temperature / top-k / top-p
distribution (the sorted reference filters), whatever shares its batch."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from cascade_protocol.generate import SamplingParams
from cascade_worker.engine import sampling
from cascade_worker.engine.sampling import SamplerState, sample, top_k_filter, top_p_filter

DRAWS = 6000
TOLERANCE = 0.03  # > 4 standard errors of a frequency over DRAWS draws


def _state(t: float, k: int, p: float, seed: int) -> SamplerState:
    return SamplerState.from_params(SamplingParams(temperature=t, top_k=k, top_p=p, seed=seed))


def _reference(logits: torch.Tensor, t: float, k: int, p: float) -> torch.Tensor:
    if t == 0:
        return torch.nn.functional.one_hot(torch.argmax(logits), logits.shape[-1]).float()
    return top_p_filter(torch.softmax(top_k_filter(logits / t, k), -1), p)


def _frequencies(logits: torch.Tensor, settings: list[tuple[float, int, float]]) -> torch.Tensor:
    """[rows, vocab] empirical frequencies, every row of every batch drawn with its own
    settings and seed."""
    counts = [Counter[int]() for _ in settings]
    for d in range(DRAWS):
        states = [_state(*s, seed=d * len(settings) + i) for i, s in enumerate(settings)]
        for i, token in enumerate(sample(logits, states)):
            counts[i][token] += 1
    return torch.tensor([[c[j] / DRAWS for j in range(logits.shape[1])] for c in counts])


def test_each_row_draws_from_its_own_filtered_distribution() -> None:
    base = torch.tensor([0.1, 3.0, 2.0, -1.0, 1.5, 0.7, 2.6, -0.3])
    settings = [(1.0, 0, 0.7), (0.8, 3, 1.0), (1.3, 4, 0.8), (1.0, 0, 1.0), (0.0, 0, 1.0),
                (0.5, 0, 0.3), (2.0, 0, 0.95)]  # fmt: skip
    logits = torch.stack([base.roll(i) for i in range(len(settings))])
    got = _frequencies(logits, settings)
    want = torch.stack([_reference(logits[i], *s) for i, s in enumerate(settings)])
    assert (got[want == 0] == 0).all()  # nothing outside a row's top-k or nucleus, ever
    torch.testing.assert_close(got, want, atol=TOLERANCE, rtol=0)


def test_a_batch_that_is_all_top_k_matches_the_reference() -> None:
    logits = torch.tensor([[0.1, 3.0, 2.0, -1.0, 1.5, 0.7], [2.0, 0.0, 1.0, 1.9, -2.0, 0.3]])
    settings = [(1.0, 2, 1.0), (0.7, 4, 0.6)]
    want = torch.stack([_reference(logits[i], *s) for i, s in enumerate(settings)])
    torch.testing.assert_close(_frequencies(logits, settings), want, atol=TOLERANCE, rtol=0)


def test_a_vocabulary_wider_than_a_chunk_draws_only_positive_columns() -> None:
    """The two-level inverse CDF, with mass in the first chunk, a middle one and the
    ragged tail chunk."""
    vocab = 3 * sampling.CHUNK + 37
    logits = torch.full((1, vocab), -1e4)
    hot = [5, sampling.CHUNK + 200, vocab - 1]
    logits[0, hot] = torch.tensor([1.0, 0.0, 2.0])
    got = _frequencies(logits, [(1.0, 0, 1.0)])[0]
    assert set(torch.nonzero(got).flatten().tolist()) <= set(hot)
    want = torch.softmax(torch.tensor([1.0, 0.0, 2.0]), -1)
    torch.testing.assert_close(got[hot], want, atol=TOLERANCE, rtol=0)


def test_the_sorted_fallback_draws_the_same_nucleus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampling, "MAX_TOP_P_ROUNDS", 0)
    logits = torch.tensor([[0.1, 3.0, 2.0, -1.0, 1.5, 0.7]])
    want = _reference(logits[0], 1.0, 0, 0.8)[None]
    torch.testing.assert_close(_frequencies(logits, [(1.0, 0, 0.8)]), want, atol=TOLERANCE, rtol=0)


def test_a_seed_draws_the_same_tokens_on_its_own_and_in_a_batch() -> None:
    logits = torch.randn(4, 1000, generator=torch.Generator().manual_seed(1)) * 2
    alone = sample(logits[2:3], [_state(0.9, 0, 0.9, seed=11)])[0]
    batch = [_state(0.7, 5, 1.0, 1), _state(0.0, 0, 1.0, 2), _state(0.9, 0, 0.9, 11),
             _state(1.0, 0, 0.5, 3)]  # fmt: skip
    assert sample(logits, batch)[2] == alone
    assert sample(logits, batch)[1] == int(torch.argmax(logits[1]))
