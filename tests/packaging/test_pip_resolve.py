"""Resolve each image's install set the way a person would: an empty venv, pip, PyPI.

`pip install --dry-run --ignore-installed --report` of '.[gateway]', '.[operator]' and
'.[worker]' (the project as Docker's build context sees it: pyproject.toml, README.md
and the source folders), then the same checks as tests/unit/test_packaging.py, which
computes these sets offline from the dev venv's metadata: no torch, numpy, UCX or CUDA
libraries for the gateway and operator, all of them for the worker. Needs PyPI and a
few minutes: `make test-packaging` (marked `packaging` and `slow`, so `make test` skips
it). Prints one line per component: how many distributions it installs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from gpu_stack import WORKER_NEEDS, families
from packaging.utils import canonicalize_name

pytestmark = [pytest.mark.packaging, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
NAME = PYPROJECT["project"]["name"]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what the Dockerfiles' build context holds, so pip writes nothing here."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for folder in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"]:
        shutil.copytree(ROOT / folder, src / folder, ignore=skip)
    return src


@pytest.fixture(scope="module")
def pip(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """pip of a fresh, empty venv (its own bundled pip; --report needs pip >= 22.2)."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    return [str(venv / "bin" / "python"), "-m", "pip"]


def resolve(pip: list[str], source: Path, extra: str, report: Path) -> dict[str, str]:
    """Name -> version of every distribution pip would install for '.[extra]'."""
    cmd = [*pip, "install", "--dry-run", "--ignore-installed", "--quiet"]
    cmd += ["--report", str(report), f".[{extra}]"]
    out = subprocess.run(cmd, cwd=source, capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    metas = [item["metadata"] for item in json.loads(report.read_text())["install"]]
    versions = {canonicalize_name(m["name"]): m["version"] for m in metas}
    return {name: version for name, version in versions.items() if name != NAME}


@pytest.mark.parametrize("component", ["gateway", "operator", "worker"])
def test_pip_resolves_each_image(
    component: str, pip: list[str], source: Path, tmp_path: Path
) -> None:
    dists = resolve(pip, source, component, tmp_path / "report.json")
    found = families(set(dists))
    torch = dists.get("torch", "absent")
    print(f"\n.[{component}]: {len(dists)} distributions; torch {torch}; GPU stack {found}")
    if component == "worker":
        assert set(WORKER_NEEDS) <= set(found), found
        assert {"safetensors", "tokenizers", "xxhash", "jinja2"} <= set(dists)
    else:
        assert found == {}, f"the {component} image would install the GPU stack"
        assert {"pydantic", "aiohttp", "prometheus-client", "kubernetes"} <= set(dists)
