"""Each component installs only what it needs: the gateway and operator images carry no
torch, numpy, UCX or CUDA libraries; the worker's carries them all.

The project is one wheel with one extra per component (pyproject.toml); each image
installs the wheel with its own extra (Dockerfile.*). Here, offline, each extra's
transitive install set is computed from the metadata of the distributions installed in
this venv (`make setup` installs `.[dev]`, which pulls every component extra), and the
gateway's and operator's entry modules are imported in an interpreter that refuses
torch, numpy and ucxx. tests/packaging/ resolves the same sets with pip into an empty
venv (needs PyPI: `make test-packaging`).
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from gpu_stack import WORKER_NEEDS, families
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
NAME = canonicalize_name(PROJECT["name"])
EXTRAS: dict[str, list[str]] = PROJECT["optional-dependencies"]

CPU_ONLY = ("gateway", "operator")


def _applies(req: Requirement, extra: str) -> bool:
    return req.marker is None or req.marker.evaluate({"extra": extra})


def _extra_requirements(extras: set[str], done: set[str]) -> list[Requirement]:
    """The project's requirements for `extras`, its self-references (cascade[x]) expanded."""
    reqs: list[Requirement] = []
    for extra in sorted(extras - done):
        done.add(extra)
        for spec in EXTRAS[extra]:
            req = Requirement(spec)
            if canonicalize_name(req.name) == NAME:
                reqs += _extra_requirements(set(req.extras), done)
            else:
                reqs.append(req)
    return reqs


def install_set(*extras: str) -> set[str]:
    """Canonical names of the distributions `pip install '.[extras]'` installs (the
    project itself left out), following the installed distributions' Requires-Dist."""
    base = [Requirement(s) for s in PROJECT["dependencies"]]
    todo = [r for r in [*base, *_extra_requirements(set(extras), set())] if _applies(r, "")]
    followed: dict[str, set[str]] = {}  # dist -> its extras already followed ("": its base)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        wanted = {"", *req.extras} - followed.setdefault(name, set())
        if not wanted:
            continue
        followed[name] |= wanted
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} is required but not installed here; run `make setup`")
        for spec in dist.requires or []:
            sub = Requirement(spec)
            if any(_applies(sub, extra) for extra in wanted):
                todo.append(sub)
    return set(followed)


def test_every_component_has_an_extra_and_dev_pulls_them_all() -> None:
    for component in ("gateway", "operator", "worker", "cli", "bench"):
        assert component in EXTRAS, component
    self_refs = [r for r in map(Requirement, EXTRAS["dev"]) if canonicalize_name(r.name) == NAME]
    assert [set(r.extras) for r in self_refs] == [{"gateway", "operator", "worker", "cli", "bench"}]


def test_the_base_carries_no_component_library() -> None:
    base = {canonicalize_name(Requirement(s).name) for s in PROJECT["dependencies"]}
    assert base.isdisjoint({"torch", "numpy", "ucxx-cu12", "kopf", "kubernetes", "networkx"})
    assert families(install_set()) == {}


@pytest.mark.parametrize("component", CPU_ONLY)
def test_cpu_components_install_no_gpu_stack(component: str) -> None:
    dists = install_set(component)
    assert families(dists) == {}, f"the {component} image would install the GPU stack"
    assert {"pydantic", "aiohttp", "prometheus-client", "kubernetes"} <= dists


def test_operator_has_its_controller_and_planner() -> None:
    assert {"kopf", "kubernetes", "networkx"} <= install_set("operator")


def test_worker_installs_the_whole_gpu_stack() -> None:
    dists = install_set("worker")
    assert set(WORKER_NEEDS) <= set(families(dists)), families(dists)
    assert {"safetensors", "tokenizers", "xxhash", "jinja2", "networkx"} <= dists
    assert "kopf" not in dists  # the worker does not talk to the API server


@pytest.mark.parametrize("component", ["gateway", "operator", "worker"])
def test_each_image_installs_its_own_extra(component: str) -> None:
    text = (ROOT / f"Dockerfile.{component}").read_text()
    args = [m.strip() for m in re.findall(r"pip install ([^&\n]*)", text)]
    installs = [a for a in args if "/tmp/wheels" in a]
    assert installs == [f'"$(ls /tmp/wheels/cascade-*.whl)[{component}]"'], installs


def test_worker_image_and_setup_install_the_pinned_torch_first() -> None:
    """The worker image has no torch-less variant (its engine runs on torch); the torch
    installed before the project is the worker extra's pin, so pip keeps that build."""
    pin = next(Requirement(s) for s in EXTRAS["worker"] if Requirement(s).name == "torch")
    version = str(pin.specifier).removeprefix("==")
    dockerfile = (ROOT / "Dockerfile.worker").read_text()
    assert f"ARG TORCH_VERSION={version}\n" in dockerfile
    assert '"torch==${TORCH_VERSION:?' in dockerfile  # an empty TORCH_VERSION fails the build
    assert f"pip install -q torch=={version}\n" in (ROOT / "hack" / "setup.sh").read_text()


# Runs in a fresh interpreter: a meta-path finder refuses the GPU stack the CPU images do
# not have (and the worker package, which they must not use), then the component's entry
# modules are imported and its app is built.
REFUSING_CHILD = textwrap.dedent(
    """
    import sys

    REFUSED = {"torch", "numpy", "ucxx", "rmm", "cupy", "cascade_worker"}


    class Refuse:
        def find_spec(self, fullname, path=None, target=None):
            if fullname.partition(".")[0] in REFUSED:
                raise ImportError(f"{fullname} is refused: not in this component's image")
            return None


    assert not REFUSED & set(sys.modules), REFUSED & set(sys.modules)
    sys.meta_path.insert(0, Refuse())
    exec(sys.argv[1])
    print("ran without", ", ".join(sorted(REFUSED)))
    """
)
ENTRIES = {
    "gateway": (
        "import cascade_gateway.kube\n"
        "from cascade_gateway.config import load_config\n"
        "from cascade_gateway.main import build_app\n"
        "build_app(load_config([], {}))\n"
    ),
    "operator": "import cascade_operator.handlers\nimport cascade_operator.main\n",
}


@pytest.mark.parametrize("component", sorted(ENTRIES))
def test_entry_modules_run_without_the_gpu_stack(component: str, tmp_path: Path) -> None:
    """The worker package is refused too: the wheel ships it, but a gateway or operator
    that imports it is one top-level `import torch` away from a broken image."""
    out = subprocess.run(
        [sys.executable, "-c", REFUSING_CHILD, ENTRIES[component]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "ran without" in out.stdout
