"""The lower bound M/B and the ratios built on it."""

from __future__ import annotations

import pytest

from cascade_bench import bound


def test_bound_is_model_over_nic_rate() -> None:
    assert bound.nic_bytes_per_s(200) == 25_000_000
    assert bound.bound_seconds(200_000_000, 200) == pytest.approx(8.0)
    assert bound.bound_seconds(0, 1000) == 0


def test_bound_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        bound.nic_bytes_per_s(0)
    with pytest.raises(ValueError):
        bound.bound_seconds(-1, 100)
    with pytest.raises(ValueError):
        bound.rate_mbit(10, 0)


def test_ratio_and_speedup_pass_unfinished_through() -> None:
    assert bound.ratio(9.2, 8.0) == pytest.approx(1.15)
    assert bound.ratio(None, 8.0) is None
    assert bound.speedup(56.0, 8.0) == pytest.approx(7.0)
    assert bound.speedup(None, 8.0) is None
    assert bound.speedup(56.0, None) is None


def test_rate_mbit() -> None:
    assert bound.rate_mbit(25_000_000, 1.0) == pytest.approx(200.0)
