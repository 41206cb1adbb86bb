"""The dev cluster's node agent runs the operator's hardened pods.

The agent plays kubelet without a container runtime: the process runs on the host's root
filesystem, but as root the agent mounts a pod's volumes at their mountPaths inside a
private mount namespace and then runs the process as its securityContext's user
(nodeagent.identity, setpriv). So what matters here is the scratch emptyDir: it must
land where TMPDIR and HOME point, be writable by that user, and must not hide host
paths a worker reads (a model checkout under /tmp).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from operator_fixtures import REF, md

from cascade_dev.nodeagent.env import base_env, container_env
from cascade_dev.nodeagent.identity import identity
from cascade_dev.nodeagent.runner import Mount, build_argv
from cascade_dev.nodeagent.volumes import materialize, mounts_for
from cascade_operator import builders, hardening
from cascade_operator.config import OperatorConfig

PROBE = """
import json, os, pathlib, sys, tempfile
fd, name = tempfile.mkstemp()
os.close(fd)
print(json.dumps({
    "tmp": tempfile.gettempdir(),
    "home": os.environ["HOME"],
    "made": name,
    "model": pathlib.Path(sys.argv[1]).read_text(),
}))
"""


class NoApi:
    def get(self, path: str) -> dict[str, Any] | None:
        return None

    def create_token(self, namespace: str, sa: str, audience: str | None, seconds: int) -> str:
        raise AssertionError("a worker pod mounts no service-account token")


def referenced_secrets(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A Secret for every secretKeyRef of the container (whatever the operator puts
    there), so its environment resolves as on a cluster where they exist."""
    out: dict[str, dict[str, Any]] = {}
    for item in container.get("env") or []:
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            secret = out.setdefault(ref["name"], {"kind": "Secret", "data": {}})
            secret["data"][ref["key"]] = base64.b64encode(b"x").decode()
    return out


def worker(tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any], list[Mount], dict[str, str]]:
    pod = builders.worker_pod(REF, md(), 0, OperatorConfig())
    pod["metadata"]["uid"] = "uid-0"
    container = pod["spec"]["containers"][0]
    paths = materialize(pod, tmp_path / "pod", NoApi(), pod_ip="10.0.0.1", host_ip="10.0.0.254")
    mounts = mounts_for(container, paths)
    base = base_env(
        pod,
        pod_ip="10.0.0.1",
        node_name="n0",
        api_host="10.0.0.254",
        path="/usr/bin:/bin",
        home="/root",
    )
    secrets = referenced_secrets(container)
    env = container_env(
        container,
        pod,
        base,
        pod_ip="10.0.0.1",
        host_ip="10.0.0.254",
        get_secret=lambda ns, name: secrets.get(name),
        get_config_map=lambda ns, name: None,
    )
    return pod, container, mounts, env


def test_the_scratch_volume_is_a_pod_directory_mounted_where_tmpdir_and_home_point(
    tmp_path: Path,
) -> None:
    _, _, mounts, env = worker(tmp_path)
    scratch = tmp_path / "pod" / "volumes" / hardening.SCRATCH_VOLUME
    assert mounts == [Mount(str(scratch), hardening.SCRATCH_PATH, False)]
    assert scratch.is_dir()
    # The pod's env wins over the agent's HOME, as kubelet's container env does.
    assert env["TMPDIR"] == env["HOME"] == hardening.SCRATCH_PATH


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="the agent mounts volumes only as root (unshare --mount)",
)
def test_a_hardened_worker_writes_its_scratch_and_still_reads_host_paths(tmp_path: Path) -> None:
    model = tmp_path / "model.txt"  # under the host's /tmp, as a test checkpoint would be
    model.write_text("weights")
    _, _, mounts, env = worker(tmp_path)
    argv = build_argv([sys.executable, "-c", PROBE, str(model)], [], mounts, can_mount=True)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["tmp"] == seen["home"] == hardening.SCRATCH_PATH
    assert seen["model"] == "weights"
    # The temp file went to the pod's emptyDir, not to the host's /var/tmp/cascade.
    scratch = tmp_path / "pod" / "volumes" / hardening.SCRATCH_VOLUME
    assert (scratch / Path(seen["made"]).name).is_file()
    assert not Path(seen["made"]).exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("setpriv") is None,
    reason="the agent changes a container's user only as root (setpriv)",
)
def test_a_hardened_worker_runs_as_its_user_with_no_capabilities(tmp_path: Path) -> None:
    """Through setpriv after the mounts: uid/gid 10001, no capability, no new privileges,
    and it still writes its scratch (an emptyDir is 0777, as the kubelet makes it) and
    reads a model it may read."""
    shared = Path(tempfile.mkdtemp(prefix="cascade-model-"))  # not below pytest's 0700 dir
    try:
        os.chmod(shared, 0o755)
        (shared / "model.txt").write_text("weights")
        pod, container, mounts, env = worker(tmp_path)
        who = identity(pod, container)
        assert who is not None
        probe = PROBE + "print(open('/proc/self/status').read())"
        argv = build_argv([sys.executable, "-c", probe, str(shared / "model.txt")], [], mounts,
                          can_mount=True, become=who.setpriv_argv())  # fmt: skip
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        first, status = out.stdout.split("\n", 1)
        assert json.loads(first)["model"] == "weights"
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        assert fields["Uid"].split() == ["10001"] * 4 and fields["Gid"].split() == ["10001"] * 4
        assert int(fields["CapEff"], 16) == int(fields["CapBnd"], 16) == 0
        assert fields["NoNewPrivs"] == "1"
    finally:
        shutil.rmtree(shared)
