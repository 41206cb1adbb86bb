"""Helpers for tests that need the real local cluster (like `kopf.testing`).

tests/integration/conftest.py builds its session fixture `dev_cluster` from these, and
any test can use `DevCluster` to talk to the cluster through kubectl or `cascade dev`.
`require_cluster` and `helm_binary` look for the tools a tier needs and skip the test
without them, or fail it under CI (the verdict is testgate.py's).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cascade_dev import processes
from cascade_dev.controlplane import APISERVER
from cascade_dev.paths import (
    APISERVER_PORT,
    ETCD_BINARY,
    KUBE_BINARIES,
    StatePaths,
    kube_bin_dir,
    repo_root,
)
from cascade_dev.testgate import Gate, gate, in_ci

CASCADE = str(Path(sys.executable).parent / "cascade")


def missing_cluster_tools() -> list[str]:
    """What the local cluster needs and this machine lacks, each with how to get it."""
    bin_dir = kube_bin_dir()
    kube = [b for b in KUBE_BINARIES if not os.access(bin_dir / b, os.X_OK)]
    missing = [f"{', '.join(kube)} (not in {bin_dir}: run hack/build-kube.sh)"] if kube else []
    if not os.access(ETCD_BINARY, os.X_OK):
        missing.append(f"etcd ({ETCD_BINARY}: apt-get install etcd-server)")
    return missing


def carry_out(verdict: Gate) -> None:
    """Skip or fail the running test (or fixture) as `verdict` says; nothing to run."""
    import pytest

    if verdict.action == "fail":
        pytest.fail(verdict.message, pytrace=False)
    if verdict.action == "skip":
        pytest.skip(verdict.message)


def require_cluster() -> None:
    """Skip the calling test when the local cluster cannot start here; under CI, fail it."""
    carry_out(gate("integration", missing_cluster_tools(), in_ci(os.environ)))


def helm_binary() -> str:
    """The path of a helm 3 binary (hack/install-helm.sh finds or installs one); without
    one the calling test skips, or under CI fails, with install-helm.sh's reason."""
    script = repo_root() / "hack" / "install-helm.sh"
    try:
        out = subprocess.run(
            ["bash", str(script)], capture_output=True, text=True, timeout=300, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        why, path = f"hack/install-helm.sh did not finish ({exc})", ""
    else:
        lines = out.stdout.strip().splitlines()
        path = lines[-1] if lines else ""
        failed = out.returncode != 0 or not path
        why = f"hack/install-helm.sh failed: {out.stderr.strip()[-500:]}" if failed else ""
    carry_out(gate("helm", [f"helm 3 ({why})"] if why else [], in_ci(os.environ)))
    return path


def apiserver_port_busy() -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", APISERVER_PORT)) == 0


def cascade_dev(
    state_dir: Path, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `cascade dev --state-dir DIR ARGS...`; raise AssertionError with its output."""
    proc = subprocess.run(
        [CASCADE, "dev", "--state-dir", str(state_dir), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"cascade dev {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
        )
    return proc


@dataclass(frozen=True)
class DevCluster:
    """Handle on a running local cluster."""

    state_dir: Path
    kubeconfig: Path
    nodes: int
    env: dict[str, str] = field(default_factory=dict)  # os.environ + KUBECONFIG

    @classmethod
    def at(cls, state_dir: Path, nodes: int) -> DevCluster:
        kubeconfig = state_dir / "kubeconfig"
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        return cls(state_dir=state_dir, kubeconfig=kubeconfig, nodes=nodes, env=env)

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            ["kubectl", *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
            check=False,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc

    def silence_node(self, node: str, silent: bool = True) -> None:
        """Hold back (or resume) `node`'s heartbeat: its kubelet looks gone, its pods run
        on (nodeagent/heartbeat.py). The node turns NotReady after the controller
        manager's grace period (40 s)."""
        path = self.state_dir / "nodeagent" / "silence"
        names = set(path.read_text().split()) if path.is_file() else set()
        names = names | {node} if silent else names - {node}
        path.write_text("".join(f"{n}\n" for n in sorted(names)))

    def stop_api_server(self) -> None:
        """Take the API server down (fault injection); `resume` brings it back."""
        processes.stop(StatePaths(self.state_dir), APISERVER)

    def resume(self) -> None:
        """`cascade dev up` again: starts whatever of the cluster is not running."""
        cascade_dev(self.state_dir, "up", "--nodes", str(self.nodes))

    def url(self, target: str, wait_s: float = 60.0) -> str:
        """`cascade dev url NAMESPACE/SERVICE[:PORT]`, asked again while the Service's
        Endpoints do not exist or list no ready address yet: the endpoints controller
        follows a Service and its pods' readiness a moment late, longer while its
        watches back off after an API-server outage."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return cascade_dev(self.state_dir, "url", target).stdout.strip()
            except AssertionError as exc:
                waiting = "not found" in str(exc) or "no ready endpoints" in str(exc)
                if not waiting or time.monotonic() > deadline:
                    raise
            time.sleep(1.0)


def wait_for(
    what: str, check: Callable[[], bool], timeout: float = 120.0, every: float = 0.5
) -> None:
    """Poll `check` every `every` seconds until it holds; fail naming `what` on timeout.
    The one synchronous poll of the tests (tests/unit/waiting.py has the async one)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def holds_for(what: str, check: Callable[[], bool], seconds: float, every: float = 0.5) -> None:
    """Assert `check` at every poll for `seconds`: a state that must stay, not a sleep
    and one look (a flap in between fails too)."""
    deadline = time.monotonic() + seconds
    while True:
        if not check():
            raise AssertionError(f"{what} no longer held")
        if time.monotonic() >= deadline:
            return
        time.sleep(every)
