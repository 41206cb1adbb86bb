"""The dev cluster's Prometheus as processes: start, stop, URL, and its pod discovery.

`cascade dev up` calls `ensure`: it starts the discovery process and Prometheus unless
they run (what `up` does for every component), restarts Prometheus when its config
changed, and waits for `/-/ready`. Prometheus listens on 9090, or where 9090 is taken
(the Debian package's own service may hold it) on the port it had before, else any free
one; `prometheus/url` records where. `stop` ends both; `cascade dev down` then removes
`prometheus/` with the rest of the cluster's state.

`python -m cascade_dev.monitor --state-dir DIR` is the discovery process. Debian's
Prometheus has no `kubernetes_sd_configs`, so this does its part: list the pods through
the local API server, watch them, and after every change rewrite the `file_sd` targets
file (`prometheus.targets_text`) when its content differs, by a rename Prometheus notices
at once. While the API server is away the last targets stay: the pods still run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import shutil
import socket
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from cascade_dev import controlplane, processes, prometheus
from cascade_dev.kubeapi import KubeApi, KubeApiError
from cascade_dev.paths import StatePaths, default_state_dir, venv_python
from cascade_dev.pki import Pki
from cascade_dev.urls import ResolveError

log = logging.getLogger("cascade_dev.monitor")
WATCH_TIMEOUT_S = 300  # the API server ends each watch after this; we then resume it
NAMES = (prometheus.DISCOVERY, prometheus.PROMETHEUS)  # start order


def write_if_changed(path: Path, text: str) -> bool:
    """Atomically replace `path` with `text`; False (and no write) when it already holds it."""
    if path.exists() and path.read_text() == text:
        return False
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return True


def _is_free(port: int) -> bool:
    """Whether Prometheus could listen on `port`: like Go's listeners, SO_REUSEADDR, so
    the TIME_WAIT connections of a Prometheus just stopped do not count as taken."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((prometheus.HOST, port))
        except OSError:
            return False
    return True


def _any_free() -> int:
    with socket.socket() as s:
        s.bind((prometheus.HOST, 0))
        return int(s.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2.0) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _recorded(paths: StatePaths) -> str | None:
    try:
        return (paths.prometheus / "url").read_text().strip()
    except OSError:
        return None


def ensure(paths: StatePaths, timeout: float) -> str | None:
    """Start what is not running; Prometheus' URL, or None where it is not installed."""
    binary = shutil.which(prometheus.BINARY)
    if binary is None:
        print("warning: prometheus is not installed (hack/setup.sh)", file=sys.stderr)
        return None
    root = paths.prometheus
    root.mkdir(parents=True, exist_ok=True)
    discovery = [venv_python(), "-m", "cascade_dev.monitor", "--state-dir", str(paths.root)]
    processes.start(paths, prometheus.DISCOVERY, discovery)
    config = root / "prometheus.yml"
    if write_if_changed(config, prometheus.config_text(paths.prometheus_targets)):
        processes.stop(paths, prometheus.PROMETHEUS)
    address = _recorded(paths)
    if processes.running(paths, prometheus.PROMETHEUS) is None or address is None:
        recorded = prometheus.port_of(address) if address else None
        port = prometheus.choose_port(recorded, _is_free, _any_free)
        processes.stop(paths, prometheus.PROMETHEUS)
        processes.start(
            paths, prometheus.PROMETHEUS, prometheus.argv(binary, config, root / "data", port)
        )
        address = prometheus.url(port)
        write_if_changed(root / "url", address + "\n")
    controlplane.wait_for(
        f"Prometheus at {address}", lambda: _ready(address), paths, prometheus.PROMETHEUS, timeout
    )
    return address


def stop(paths: StatePaths) -> None:
    for name in reversed(NAMES):
        processes.stop(paths, name)


def url(paths: StatePaths) -> str:
    """`cascade dev url prometheus`."""
    recorded = _recorded(paths)
    if recorded is None or processes.running(paths, prometheus.PROMETHEUS) is None:
        raise ResolveError("prometheus is not running (`cascade dev up` starts it)")
    return recorded


class Discovery:
    """Pods by uid, kept current by list-then-watch, mirrored into the targets file."""

    def __init__(self, api: KubeApi, targets: Path) -> None:
        self.api, self.targets = api, targets
        self.pods: dict[str, dict[str, Any]] = {}
        self.rv: str | None = None

    def publish(self) -> None:
        if write_if_changed(self.targets, prometheus.targets_text(self.pods.values())):
            log.info("targets: %d pod(s)", len(prometheus.target_groups(self.pods.values())))

    def relist(self) -> None:
        data = self.api.get("/api/v1/pods")
        self.pods = {p["metadata"]["uid"]: p for p in data.get("items") or []}
        self.rv = str(data["metadata"]["resourceVersion"])
        self.publish()

    def watch(self) -> None:
        """Follow one watch to its end (the server's timeout, or an error event)."""
        path = f"/api/v1/pods?watch=1&resourceVersion={self.rv}&timeoutSeconds={WATCH_TIMEOUT_S}"
        api = self.api
        conn = http.client.HTTPSConnection(
            api.host, api.port, context=api.ctx, timeout=WATCH_TIMEOUT_S + 30
        )
        try:
            conn.request("GET", path, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise KubeApiError(resp.status, resp.read().decode(errors="replace")[:300])
            while self.rv is not None and (line := resp.readline()):
                self.apply(json.loads(line))
        finally:
            conn.close()

    def apply(self, event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        meta = obj.get("metadata") or {}
        if kind == "ERROR":  # 410 Gone: our resourceVersion is too old; relist
            self.rv = None
            return
        if kind == "DELETED":
            self.pods.pop(meta.get("uid", ""), None)
        elif kind in ("ADDED", "MODIFIED"):
            self.pods[meta["uid"]] = obj
        self.rv = str(meta.get("resourceVersion") or self.rv)
        self.publish()

    def run(self) -> None:
        delay = 0.5
        while True:
            try:
                if self.rv is None:
                    self.relist()
                self.watch()
                delay = 0.5
            except (OSError, http.client.HTTPException, KubeApiError, ValueError) as e:
                log.warning("pod watch failed (%s); relisting in %.1fs", e, delay)
                self.rv = None
                time.sleep(delay)
                delay = min(delay * 2, 5.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cascade_dev.monitor", description=__doc__)
    parser.add_argument("--state-dir", type=Path, default=default_state_dir())
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    paths = StatePaths(args.state_dir)
    paths.prometheus.mkdir(parents=True, exist_ok=True)
    Discovery(KubeApi(Pki(paths.pki)), paths.prometheus_targets).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
