"""Fixtures the unit tests share; a module's own fixture of the same name overrides one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from engine_harness import make_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random llama checkpoint (engine_harness.make_model), one per test module."""
    return make_model(tmp_path_factory.mktemp("llama"), "llama")


@pytest.fixture
def one_ucx_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Let ucxx's notifier thread wake the one pipeline loop instead of every loop
    polling UCX (several times faster on two cores), as the stage processes do. For
    `ucx` tests only: they run in an interpreter of their own (tests/conftest.py), and
    this must not leak into a parent whose other UCX tests use several loops."""
    from cascade_worker.transport.env import stop_notifier  # ucxx: only where it is used

    monkeypatch.setenv("UCXPY_ENABLE_PYTHON_FUTURE", "1")
    yield
    stop_notifier()
