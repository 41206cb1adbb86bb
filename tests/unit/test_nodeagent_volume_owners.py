"""Volumes a pod's user can use (the dev node agent as a kubelet): an emptyDir is 0777, a
claim takes the pod's fsGroup (OnRootMismatch: once), and `cascade model init` shares a
model directory with the pods' group so the profile Job can write `.materialized/`."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from cascade_api.constants import POD_USER
from cascade_cli.model import share_with_pods
from cascade_dev.nodeagent.volumes import materialize

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="only root gives files away")


class Claims:
    def __init__(self, host: Path) -> None:
        self.host = host

    def get(self, path: str) -> dict[str, Any] | None:
        if "persistentvolumeclaims" in path:
            return {"spec": {"volumeName": "pv"}, "status": {"phase": "Bound"}}
        return {"spec": {"hostPath": {"path": str(self.host)}}}

    def create_token(self, namespace: str, sa: str, audience: str | None, seconds: int) -> str:
        raise AssertionError("no token here")


def pod(fs_group: int | None, policy: str | None = None) -> dict[str, Any]:
    sc = {} if fs_group is None else {"fsGroup": fs_group}
    if policy:
        sc["fsGroupChangePolicy"] = policy
    volumes = [{"name": "scratch", "emptyDir": {}},
               {"name": "model", "persistentVolumeClaim": {"claimName": "weights"}}]  # fmt: skip
    return {"metadata": {"namespace": "ns"}, "spec": {"securityContext": sc, "volumes": volumes}}


@root_only
def test_an_empty_dir_is_world_writable_and_a_claim_takes_the_fs_group(tmp_path: Path) -> None:
    claim = tmp_path / "claim"
    (claim / "llama").mkdir(parents=True)
    (claim / "llama" / "config.json").write_text("{}")
    paths = materialize(pod(POD_USER, "OnRootMismatch"), tmp_path / "pod", Claims(claim),
                        pod_ip="10.0.0.1", host_ip="10.0.0.254")  # fmt: skip
    assert stat.S_IMODE(paths["scratch"].stat().st_mode) == 0o777
    for path in (claim, claim / "llama", claim / "llama" / "config.json"):
        assert path.stat().st_gid == POD_USER and path.stat().st_mode & 0o060 == 0o060
    assert claim.stat().st_mode & stat.S_ISGID
    # OnRootMismatch: the root's group already matches, so nothing is walked again.
    os.chown(claim / "llama" / "config.json", -1, 0)
    materialize(pod(POD_USER, "OnRootMismatch"), tmp_path / "pod2", Claims(claim),
                pod_ip="10.0.0.1", host_ip="10.0.0.254")  # fmt: skip
    assert (claim / "llama" / "config.json").stat().st_gid == 0


@root_only
def test_a_model_directory_is_shared_with_the_pods_group(tmp_path: Path) -> None:
    model = tmp_path / "m"
    (model / ".materialized").mkdir(parents=True)
    share_with_pods(model)
    for path in (model, model / ".materialized"):
        assert path.stat().st_gid == POD_USER
        assert path.stat().st_mode & (0o070 | stat.S_ISGID) == 0o070 | stat.S_ISGID


def test_a_written_checkpoint_is_readable_by_every_user(tmp_path: Path) -> None:
    """safetensors writes 0600; pods read the weights as their own user."""
    from cascade_worker.checkpoints.checkpoint import write_checkpoint
    from cascade_worker.checkpoints.spec import ModelSpec

    info = write_checkpoint(tmp_path / "m", ModelSpec(layers=1, hidden=32), force=False)
    for name in info.files:
        assert stat.S_IMODE((tmp_path / "m" / name).stat().st_mode) == 0o644
