"""Where Prometheus finds a pod's metrics: the `prometheus.io/*` annotations.

The convention of Prometheus' own kubernetes_sd examples (and of the dev cluster's
Prometheus, docs/observability.md): a pod that says `scrape: "true"` is scraped on the
annotated port and path. Every pod the operator builds carries them; the chart's
PodMonitors are the prometheus-operator's way to the same pods.
"""

from __future__ import annotations

METRICS_PATH = "/metrics"


def scrape_annotations(port: int, path: str = METRICS_PATH) -> dict[str, str]:
    return {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": path,
    }
