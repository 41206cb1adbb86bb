"""Issue 14, acceptance 1: every panel of the chart's Grafana dashboard has data.

On the local cluster with its Prometheus (`cascade dev up` starts it; it finds pods by
their `prometheus.io/*` annotations): the chart installed as `make demo` does, an
autoscaled deployment of two instances (the second gets its weights through a
ScalePlan), a replay of a short trace through the gateway with both request classes,
then every panel's PromQL (charts/cascade/dashboards/cascade.json, Grafana's variables
substituted) must return series from the real Prometheus. The test prints each panel's
title and a sample value: screenshot-free proof.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from dashboard_queries import panel_queries
from integration_helpers import BIN, ensure_example_model, helm_release

from cascade_dev.testing import DevCluster, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.helm,
    pytest.mark.timeout(900),
    pytest.mark.nodes(2),
]

APP_NS, MD = f"dash-{uuid.uuid4().hex[:6]}", "dash"


@pytest.fixture(scope="module")
def prometheus(dev_cluster: DevCluster) -> str:
    found = subprocess.run(
        [str(BIN / "cascade"), "dev", "--state-dir", str(dev_cluster.state_dir), "url",
         "prometheus"], capture_output=True, text=True, check=False,
    )  # fmt: skip
    if found.returncode != 0:
        pytest.skip(f"the dev cluster runs no Prometheus: {found.stderr.strip()}")
    return found.stdout.strip()


@pytest.fixture(scope="module")
def deployment(dev_cluster: DevCluster, prometheus: str) -> Iterator[str]:
    ensure_example_model()
    with helm_release(dev_cluster):
        dev_cluster.kubectl("create", "namespace", APP_NS)
        md = {
            "apiVersion": "cascade.dev/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": MD, "namespace": APP_NS},
            "spec": {
                "model": {"uri": "file:///var/lib/cascade/models/tiny-llama"},
                "replicas": 1,
                "hostCopies": 0,
                "scaling": {"minReplicas": 1, "maxReplicas": 3},
                "slo": {"interactive": {"ttftMs": 2000}, "batch": {"ttftMs": 30000}},
            },
        }
        dev_cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(md))
        try:
            yield MD
        finally:  # while the operator runs: it removes its finalizer
            dev_cluster.kubectl("delete", "md", MD, "-n", APP_NS, "--timeout=120s", check=False)
            dev_cluster.kubectl("delete", "namespace", APP_NS, "--wait=false", check=False)


def get(dev: DevCluster, *args: str) -> Any:
    return json.loads(dev.kubectl("get", *args, "-o", "json").stdout)


def trace(path: Path, requests: int = 80, seconds: float = 20.0) -> Path:
    """A trace in the Azure LLM trace's format: arrivals over `seconds`, short requests."""
    rng = random.Random(14)
    start = datetime(2023, 11, 16, 18, 0, 0)
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(requests):
        at = start + timedelta(seconds=seconds * i / requests)
        rows.append(f"{at:%Y-%m-%d %H:%M:%S.%f},{rng.randint(16, 160)},{rng.randint(4, 16)}")
    path.write_text("\n".join(rows) + "\n")
    return path


SHOWN_LABELS = ("role", "mode", "reason", "class", "code", "outcome", "estimate", "stage", "pod")


def _finite(value: float) -> float:
    return value if math.isfinite(value) else -math.inf


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.load(resp)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def test_every_dashboard_panel_has_data_after_a_replay(
    dev_cluster: DevCluster, deployment: str, prometheus: str, tmp_path: Path
) -> None:
    def ready_workers() -> int:
        pods = get(dev_cluster, "pods", "-n", APP_NS, "-l", "app.kubernetes.io/component=worker")
        return sum(
            any(c["type"] == "Ready" and c["status"] == "True"
                for c in p["status"].get("conditions", []))
            for p in pods["items"]
        )  # fmt: skip

    # One instance, and Prometheus holding the operator's zeros for this deployment; then
    # minReplicas 2 makes the autoscaler scale up: a plan and a start-up to count.
    wait_for("1 instance Ready", lambda: ready_workers() == 1, timeout=300)
    plans_series = f'cascade_operator_scaleplans_total{{namespace="{APP_NS}"}}'
    wait_for("Prometheus scraping the operator", lambda: bool(query(prometheus, plans_series)))
    scaled = {"spec": {"replicas": 2, "scaling": {"minReplicas": 2}}}
    dev_cluster.kubectl("patch", "md", deployment, "-n", APP_NS, "--type=merge",
                        "-p", json.dumps(scaled))  # fmt: skip

    def settled() -> bool:
        plans = get(dev_cluster, "scaleplans", "-n", APP_NS)["items"]
        done = [p for p in plans if (p.get("status") or {}).get("phase") == "Completed"]
        return ready_workers() == 2 and bool(done)

    wait_for("2 instances Ready and a plan Completed", settled, timeout=300)
    gateway = dev_cluster.url(f"{APP_NS}/{deployment}-gateway")
    replay = subprocess.run(
        [sys.executable, "-m", "cascade_cli.main", "bench", "replay",
         "--trace", str(trace(tmp_path / "trace.csv")), "--url", gateway,
         "--batch-fraction", "0.3", "--no-progress", "--json", str(tmp_path / "replay.json")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr[-2000:]
    print(replay.stdout[-1500:])
    panels = panel_queries(APP_NS, deployment)
    assert panels

    # A few scrapes (every 5 s) after the replay: rates over 1m need two samples.
    deadline, missing = time.monotonic() + 120, ["not asked yet"]
    while missing and time.monotonic() < deadline:
        missing = [f"{p.title}: {e}" for p in panels for e in p.exprs if not query(prometheus, e)]
        time.sleep(0 if not missing else 5)
    assert not missing, "panels without data:\n" + "\n".join(missing)
    for panel in panels:
        for expr in panel.exprs:
            rows = query(prometheus, expr)
            shown = max(rows, key=lambda r: _finite(float(r["value"][1])))  # the largest
            labels = {k: v for k, v in shown["metric"].items() if k in SHOWN_LABELS}
            print(f"{panel.title:<50} {labels} = {shown['value'][1]} ({len(rows)} series)")
    # The scale-up shows: a plan counted, its times and the new instance's start-up.
    plans = query(
        prometheus, next(p for p in panels if p.title.startswith("Scale plans by")).exprs[0]
    )
    assert max(float(r["value"][1]) for r in plans) > 0
    for title in ("Scale plan completion: predicted vs measured (mean", "Start-up time by stage"):
        rows = query(prometheus, next(p for p in panels if p.title.startswith(title)).exprs[0])
        assert any(math.isfinite(float(r["value"][1])) for r in rows), (title, rows)
