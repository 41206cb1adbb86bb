"""Where the local cluster keeps its files.

Every component (control plane, fabric, node agent, CLI, tests) finds the cluster through
these functions, so the layout documented in docs/HELPERS-BRIEF.md lives in one place:
`$CASCADE_DEV_DIR` (default `~/.local/state/cascade/dev`) holds `pki/`, `etcd/`, `logs/`,
`kubeconfig`, `cluster.json`, `pods/<uid>/` and `prometheus/` (config, targets, data).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

KUBE_VERSION = "1.20.2"
KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ETCD_BINARY = Path("/usr/bin/etcd")

# Fixed local ports. etcd avoids its defaults (2379/2380) so a system etcd can coexist.
APISERVER_PORT = 6443
ETCD_CLIENT_PORT = 23790
ETCD_PEER_PORT = 23800


def default_state_dir() -> Path:
    env = os.environ.get("CASCADE_DEV_DIR")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".local" / "state" / "cascade" / "dev"


def kube_bin_dir() -> Path:
    """Folder of the cached kube binaries (hack/build-kube.sh computes the same path)."""
    env = os.environ.get("CASCADE_KUBE_CACHE")
    if env:
        return Path(env).expanduser() / "bin"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "cascade" / f"kube-{KUBE_VERSION}" / "bin"


def repo_root() -> Path:
    """The source checkout (the package is installed editable from it)."""
    return Path(__file__).resolve().parents[2]


def venv_python() -> str:
    """The interpreter that runs the node agent: the one running us (the project venv)."""
    return sys.executable


@dataclass(frozen=True)
class StatePaths:
    """Named paths inside one cluster's state directory."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def etcd(self) -> Path:
        return self.root / "etcd"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pods(self) -> Path:
        return self.root / "pods"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def prometheus(self) -> Path:
        return self.root / "prometheus"

    @property
    def prometheus_targets(self) -> Path:
        """The file_sd targets file cascade_dev.promsd writes and Prometheus reads."""
        return self.prometheus / "targets.json"

    @property
    def cluster_json(self) -> Path:
        return self.root / "cluster.json"

    def pidfile(self, name: str) -> Path:
        return self.root / f"{name}.pid"

    def logfile(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def pod_dir(self, uid: str) -> Path:
        return self.pods / uid
