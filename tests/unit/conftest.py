"""Fixtures the unit tests share; a module's own fixture of the same name overrides one."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_harness import make_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random llama checkpoint (engine_harness.make_model), one per test module."""
    return make_model(tmp_path_factory.mktemp("llama"), "llama")
