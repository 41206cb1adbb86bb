"""Preparing a container's command line and environment (node agent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cascade_dev.nodeagent.containers import Run
from cascade_dev.nodeagent.context import HostEnv
from cascade_dev.nodeagent.podstart import StartError, prepare

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
POD: dict[str, Any] = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {}}


def host(tmp_path: Path, can_mount: bool) -> HostEnv:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "cascade-worker"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    return HostEnv(
        str(bin_dir), f"{bin_dir}:/usr/bin:/bin", str(tmp_path), can_mount, "https://127.0.0.1:6443"
    )


def run_prepare(
    tmp_path: Path, container: dict[str, Any], can_mount: bool, prefix: list[str] | None = None
) -> Any:
    token_dir = tmp_path / "volumes" / "token"
    token_dir.mkdir(parents=True, exist_ok=True)
    (token_dir / "token").write_text("TOKEN")
    (token_dir / "ca.crt").write_bytes(b"CA")
    return prepare(
        Run(container["name"], False, container),
        POD,
        pod_dir=tmp_path,
        prefix=prefix or [],
        volumes={"token": token_dir},
        base={"POD_IP": "127.1.0.2", "PATH": "/usr/bin"},
        pod_ip="127.1.0.2",
        host_ip="127.1.0.1",
        host=host(tmp_path, can_mount),
        get_secret=lambda ns, n: None,
        get_config_map=lambda ns, n: None,
    )


WORKER = {
    "name": "w",
    "image": "ghcr.io/cascade-dev/cascade-worker:0.1.0",
    "args": ["--host=$(POD_IP)"],
    "volumeMounts": [{"name": "token", "mountPath": SA}],
}


def test_root_bind_mounts_inside_netns(tmp_path: Path) -> None:
    prep = run_prepare(tmp_path, WORKER, True, ["ip", "netns", "exec", "cxp-1"])
    assert prep.argv[:6] == ["ip", "netns", "exec", "cxp-1", "sh", "-c"]
    assert f"mount --bind {tmp_path}/volumes/token {SA}" in prep.argv[6]
    assert prep.argv[-2:] == [f"{tmp_path}/bin/cascade-worker", "--host=127.1.0.2"]
    assert prep.command == [f"{tmp_path}/bin/cascade-worker", "--host=127.1.0.2"]
    assert "KUBECONFIG" not in prep.env


def test_without_root_service_account_comes_as_kubeconfig(tmp_path: Path) -> None:
    prep = run_prepare(tmp_path, WORKER, False)
    assert prep.argv == [f"{tmp_path}/bin/cascade-worker", "--host=127.1.0.2"]
    kc = json.loads(Path(prep.env["KUBECONFIG"]).read_text())
    assert kc["users"][0]["user"]["token"] == "TOKEN"
    assert kc["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert kc["contexts"][0]["context"]["namespace"] == "ns"


def test_start_errors_carry_kubelet_reasons(tmp_path: Path) -> None:
    with pytest.raises(StartError) as bad_image:
        run_prepare(tmp_path, {"name": "x", "image": "nginx"}, True)
    assert bad_image.value.reason == "ErrImagePull"
    missing = {
        "name": "x",
        "image": "busybox",
        "command": ["sleep", "1"],
        "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
    }
    with pytest.raises(StartError) as bad_env:
        run_prepare(tmp_path, missing, True)
    assert bad_env.value.reason == "CreateContainerConfigError"
