"""The dev cluster's Prometheus: which pods it scrapes, its config and command line (pure).

Prometheus runs on the host beside the control plane (Debian's `prometheus` package, not a
pod: the dev cluster has no images) and scrapes pods at their IPs, which the host routes
on the emulated fabric. Debian builds Prometheus without `kubernetes_sd_configs` (removed
in 1.5 for client-go's dependencies), so discovery is ours: a small process
(`cascade_dev.promsd`) lists and watches pods through the local API server and writes a
`file_sd` targets file, applying the rules of Prometheus' own kubernetes-pods example,
which every Cascade pod follows (docs/observability.md): keep pods annotated
`prometheus.io/scrape: "true"`, scrape `prometheus.io/port` at `prometheus.io/path`.
Series get the labels dashboards and `cascade top` select on: `namespace`, `pod`, `node`,
`deployment`, `component`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from cascade_api.constants import LABEL_COMPONENT, LABEL_DEPLOYMENT

PROMETHEUS = "prometheus"  # process name: pidfile, log, `cascade dev url prometheus`
DISCOVERY = "prometheus-sd"  # the pod discovery process
BINARY = "prometheus"  # on PATH: /usr/bin/prometheus from the Debian package
DEFAULT_PORT = 9090
HOST = "127.0.0.1"  # local only, like the rest of the dev cluster's control plane
JOB = "kubernetes-pods"
SCRAPE_INTERVAL = "5s"  # a scale-up lasts seconds: the default 15 s would miss it
SCRAPE_TIMEOUT = "4s"  # must not exceed the interval
RETENTION = "2d"  # a dev cluster's history: a day of experiments and the morning after

SCRAPE = "prometheus.io/scrape"
PORT = "prometheus.io/port"
PATH = "prometheus.io/path"
DEFAULT_PATH = "/metrics"
POD_LABELS = {LABEL_DEPLOYMENT: "deployment", LABEL_COMPONENT: "component"}
FINISHED = ("Succeeded", "Failed")  # their targets could only be down


def _ports(pod: dict[str, Any]) -> list[int]:
    """The annotated port (a number, or a container port's name), else every declared
    TCP container port: what the kubernetes-pods relabel recipe ends up scraping."""
    declared = [
        p
        for c in (pod.get("spec") or {}).get("containers") or []
        for p in c.get("ports") or []
        if p.get("protocol", "TCP") == "TCP" and "containerPort" in p
    ]
    want = str(((pod.get("metadata") or {}).get("annotations") or {}).get(PORT, "")).strip()
    if want.isdigit():
        return [int(want)]
    if want:
        return [int(p["containerPort"]) for p in declared if p.get("name") == want][:1]
    return sorted({int(p["containerPort"]) for p in declared})


def target_group(pod: dict[str, Any]) -> dict[str, Any] | None:
    """One file_sd target group for a pod, or None when Prometheus should not scrape it."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    annotations = meta.get("annotations") or {}
    ip = status.get("podIP")
    if annotations.get(SCRAPE) != "true" or not ip or status.get("phase") in FINISHED:
        return None
    ports = _ports(pod)
    if not ports:
        return None
    host = f"[{ip}]" if ":" in ip else ip
    labels = {
        "__metrics_path__": annotations.get(PATH) or DEFAULT_PATH,
        "namespace": meta.get("namespace", ""),
        "pod": meta.get("name", ""),
        "node": spec.get("nodeName", ""),
    }
    pod_labels = meta.get("labels") or {}
    labels |= {name: pod_labels[key] for key, name in POD_LABELS.items() if pod_labels.get(key)}
    return {"targets": [f"{host}:{p}" for p in ports], "labels": labels}


def target_groups(pods: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Target groups of all scraped pods, sorted so an unchanged set writes the same file."""
    groups = [g for g in map(target_group, pods) if g is not None]
    return sorted(groups, key=lambda g: (g["labels"]["namespace"], g["labels"]["pod"]))


def targets_text(pods: Iterable[dict[str, Any]]) -> str:
    return json.dumps(target_groups(pods), indent=1, sort_keys=True) + "\n"


def render_config(targets_file: Path) -> dict[str, Any]:
    """prometheus.yml as a dict: one job over the discovered pods of every namespace."""
    return {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_TIMEOUT},
        "scrape_configs": [
            {
                "job_name": JOB,
                # The operator's series carry the deployment's own `namespace` and
                # `deployment`: they win over the operator pod's target labels.
                "honor_labels": True,
                # Prometheus sees the file's rename at once (inotify); the refresh is a
                # fallback.
                "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "30s"}],
            }
        ],
    }


def config_text(targets_file: Path) -> str:
    body = yaml.safe_dump(render_config(targets_file), sort_keys=False)
    return "# Written by `cascade dev up`; edits are overwritten.\n" + body


def argv(binary: str, config: Path, data_dir: Path, port: int) -> list[str]:
    """The command line; it names the state dir, so processes.running recognises it."""
    return [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={data_dir}",
        f"--storage.tsdb.retention.time={RETENTION}",
        f"--web.listen-address={HOST}:{port}",
    ]


def choose_port(
    recorded: int | None, is_free: Callable[[int], bool], any_free: Callable[[], int]
) -> int:
    """The port a (re)started Prometheus listens on: 9090, the well-known one, else the
    one it had (a stable URL), else any free one. The Debian package's own service, where
    a machine runs it, holds 9090."""
    for port in (DEFAULT_PORT, recorded):
        if port is not None and is_free(port):
            return port
    return any_free()


def url(port: int) -> str:
    return f"http://{HOST}:{port}"


def port_of(url_text: str) -> int | None:
    """The port of a recorded URL, None when it does not parse."""
    match = re.fullmatch(r"http://[^/]+:(\d+)/?", url_text.strip())
    return int(match.group(1)) if match else None
