"""The one percentile definition of each kind (cascade_protocol.stats)."""

from __future__ import annotations

import pytest

from cascade_protocol.stats import nearest_rank, percentile


def test_nearest_rank_returns_an_observed_value() -> None:
    assert nearest_rank([], 50) is None
    assert nearest_rank([3.0], 90) == 3.0
    values = [float(v) for v in range(1, 11)]
    assert (nearest_rank(values, 50), nearest_rank(values, 90), nearest_rank(values, 100)) == (
        5.0, 9.0, 10.0
    )  # fmt: skip


def test_percentile_interpolates_as_numpy_does() -> None:
    numpy = pytest.importorskip("numpy")
    values = [((i * 37) % 101) / 7 for i in range(101)]
    assert percentile([], 50) is None
    for q in (0, 25, 50, 90, 99, 100):
        assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)))
