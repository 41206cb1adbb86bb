"""Making sure the binaries `cascade dev up` runs are on this machine.

kube-apiserver, -controller-manager and -scheduler come from hack/build-kube.sh (a
one-time ~6 minute build, cached outside the repo); etcd, iproute2 and kubectl (kubernetes-client)
are Debian packages. All apt installs go through `apt_install`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cascade_dev.paths import ETCD_BINARY, KUBE_BINARIES, kube_bin_dir, repo_root
from cascade_dev.processes import ancestors


class ToolchainError(RuntimeError):
    pass


def apt_install(*packages: str) -> None:
    """Install Debian packages non-interactively (as root, else through sudo)."""
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"installing {' '.join(packages)} with apt-get", file=sys.stderr)
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        [*sudo, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
        check=True,
        env=env,
    )


def _missing_kube(bin_dir: Path) -> list[str]:
    return [b for b in KUBE_BINARIES if not os.access(bin_dir / b, os.X_OK)]


def _other_build_running() -> bool:
    mine = ancestors()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) not in mine:
            try:
                if b"build-kube.sh" in (entry / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def ensure_kube_binaries() -> Path:
    """Build the kube binaries once (or wait for a build already under way)."""
    bin_dir = kube_bin_dir()
    if not _missing_kube(bin_dir):
        return bin_dir
    script = repo_root() / "hack" / "build-kube.sh"
    if not script.exists():
        raise ToolchainError(f"{', '.join(_missing_kube(bin_dir))} missing and no {script}")
    lock_path = bin_dir.parent / ".build.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per machine among `cascade dev up`s
        while _other_build_running():  # e.g. started by hand, without the lock
            print("waiting for a running hack/build-kube.sh ...", file=sys.stderr)
            time.sleep(10)
        if _missing_kube(bin_dir):
            print("building kube binaries (one time, several minutes) ...", file=sys.stderr)
            subprocess.run(["bash", str(script)], check=True)
    if missing := _missing_kube(bin_dir):
        raise ToolchainError(f"hack/build-kube.sh finished but {missing} missing in {bin_dir}")
    return bin_dir


def ensure_system_tools(need_ip: bool) -> None:
    """etcd and kubectl always; iproute2 when the netns fabric will be built."""
    packages = []
    if not ETCD_BINARY.exists():
        packages.append("etcd-server")
    if not shutil.which("kubectl"):
        packages.append("kubernetes-client")
    if need_ip and not (shutil.which("ip") and shutil.which("tc")):
        packages.append("iproute2")
    if packages:
        apt_install(*packages)
