"""The dev cluster's Prometheus: which pods become targets, with which labels; its config,
command line and port; the discovery's event handling; the CLI flags (nothing starts)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cascade_cli.main import main
from cascade_dev import cluster, monitor, prometheus
from cascade_dev.paths import StatePaths

ANNOTATED = {"prometheus.io/scrape": "true", "prometheus.io/port": "8080"}


def _pod(
    name: str = "w-0",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    ip: str | None = "198.18.1.2",
    phase: str = "Running",
    ports: list[dict[str, Any]] | None = None,
    uid: str = "uid-w-0",
    rv: str = "1",
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid,
            "resourceVersion": rv,
            "annotations": ANNOTATED if annotations is None else annotations,
            "labels": labels or {},
        },
        "spec": {"nodeName": "cascade-node-1", "containers": [{"name": "c", "ports": ports}]},
        "status": {"phase": phase, "podIP": ip},
    }


def test_annotated_pod_becomes_a_target_with_the_interface_labels() -> None:
    labels = {"cascade.dev/deployment": "tiny", "app.kubernetes.io/component": "worker"}
    pod = _pod(annotations={**ANNOTATED, "prometheus.io/path": "/m"}, labels=labels)
    assert prometheus.target_group(pod) == {
        "targets": ["198.18.1.2:8080"],
        "labels": {
            "__metrics_path__": "/m",
            "namespace": "ns",
            "pod": "w-0",
            "node": "cascade-node-1",
            "deployment": "tiny",
            "component": "worker",
        },
    }


def test_path_defaults_to_metrics_and_absent_pod_labels_are_left_out() -> None:
    group = prometheus.target_group(_pod())
    assert group is not None
    assert group["labels"]["__metrics_path__"] == "/metrics"
    assert "deployment" not in group["labels"] and "component" not in group["labels"]


@pytest.mark.parametrize(
    "pod",
    [
        _pod(annotations={}),  # not annotated
        _pod(annotations={**ANNOTATED, "prometheus.io/scrape": "false"}),
        _pod(ip=None),  # not started yet
        _pod(phase="Succeeded"),
        _pod(phase="Failed"),
        _pod(annotations={"prometheus.io/scrape": "true"}),  # no port anywhere
        _pod(annotations={"prometheus.io/scrape": "true", "prometheus.io/port": "nope"}),
    ],
)
def test_pods_not_scraped(pod: dict[str, Any]) -> None:
    assert prometheus.target_group(pod) is None


def test_port_by_name_or_declared_ports() -> None:
    ports = [
        {"name": "http", "containerPort": 8000},
        {"name": "metrics", "containerPort": 9100},
        {"name": "dns", "containerPort": 53, "protocol": "UDP"},
    ]
    named = {"prometheus.io/scrape": "true", "prometheus.io/port": "metrics"}
    group = prometheus.target_group(_pod(annotations=named, ports=ports))
    assert group is not None and group["targets"] == ["198.18.1.2:9100"]
    bare = prometheus.target_group(_pod(annotations={"prometheus.io/scrape": "true"}, ports=ports))
    assert bare is not None and bare["targets"] == ["198.18.1.2:8000", "198.18.1.2:9100"]
    v6 = prometheus.target_group(_pod(ip="fd00::5"))
    assert v6 is not None and v6["targets"] == ["[fd00::5]:8080"]


def test_targets_text_is_sorted_and_stable() -> None:
    pods = [_pod("b"), _pod("a", annotations={}), _pod("c"), _pod("a2")]
    text = prometheus.targets_text(pods)
    assert [g["labels"]["pod"] for g in json.loads(text)] == ["a2", "b", "c"]
    assert prometheus.targets_text(reversed(pods)) == text


def test_config_scrapes_the_targets_file_every_5s(tmp_path: Path) -> None:
    targets = tmp_path / "targets.json"
    doc = yaml.safe_load(prometheus.config_text(targets))
    assert doc["global"] == {"scrape_interval": "5s", "scrape_timeout": "4s"}
    (job,) = doc["scrape_configs"]
    assert job["job_name"] == prometheus.JOB
    assert job["file_sd_configs"][0]["files"] == [str(targets)]
    assert job["honor_labels"] is True  # the operator's namespace/deployment labels win


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_accepts_config_and_targets(tmp_path: Path) -> None:
    targets = tmp_path / "targets.json"
    targets.write_text(prometheus.targets_text([_pod()]))
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus.config_text(targets))
    proc = subprocess.run(
        ["promtool", "check", "config", str(config)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_argv_listens_locally_with_short_retention(tmp_path: Path) -> None:
    argv = prometheus.argv("/usr/bin/prometheus", tmp_path / "p.yml", tmp_path / "data", 9091)
    assert argv[0] == "/usr/bin/prometheus"
    assert "--web.listen-address=127.0.0.1:9091" in argv
    assert "--storage.tsdb.retention.time=2d" in argv
    assert f"--storage.tsdb.path={tmp_path / 'data'}" in argv


def test_choose_port_prefers_9090_then_its_old_port_then_any() -> None:
    def pick(recorded: int | None, free: set[int]) -> int:
        return prometheus.choose_port(recorded, free.__contains__, lambda: 41234)

    assert pick(9500, {9500, 9090}) == 9090
    assert pick(9500, {9500}) == 9500
    assert pick(None, {9500}) == 41234
    assert pick(9500, set()) == 41234
    assert prometheus.port_of(prometheus.url(9500)) == 9500
    assert prometheus.port_of("garbage") is None


def test_discovery_mirrors_watch_events_into_the_targets_file(tmp_path: Path) -> None:
    targets = tmp_path / "targets.json"
    sd = monitor.Discovery(api=None, targets=targets)  # type: ignore[arg-type]
    sd.rv = "1"

    def pods() -> list[str]:
        return [g["labels"]["pod"] for g in json.loads(targets.read_text())]

    sd.apply({"type": "ADDED", "object": _pod("a", uid="ua", rv="2")})
    sd.apply({"type": "ADDED", "object": _pod("b", uid="ub", rv="3", annotations={})})
    assert pods() == ["a"] and sd.rv == "3"
    sd.apply({"type": "MODIFIED", "object": _pod("b", uid="ub", rv="4")})
    assert pods() == ["a", "b"]
    before = targets.stat().st_mtime_ns
    sd.apply({"type": "MODIFIED", "object": _pod("b", uid="ub", rv="5")})  # same targets
    assert targets.stat().st_mtime_ns == before
    sd.apply({"type": "DELETED", "object": _pod("a", uid="ua", rv="6")})
    assert pods() == ["b"]
    sd.apply({"type": "ERROR", "object": {"code": 410}})
    assert sd.rv is None  # relist next


def _capture_up(monkeypatch: pytest.MonkeyPatch) -> list[cluster.UpOptions]:
    seen: list[cluster.UpOptions] = []

    def fake_up(paths: Any, opts: cluster.UpOptions) -> Any:
        seen.append(opts)
        return cluster.plan_cluster(opts.nodes)

    monkeypatch.setattr(cluster, "up", fake_up)
    return seen


def test_no_prometheus_flag_reaches_up_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen = _capture_up(monkeypatch)
    state = str(tmp_path)
    assert main(["dev", "--state-dir", state, "up", "--nodes", "1"]) == 0
    assert main(["dev", "--state-dir", state, "up", "--nodes", "1", "--no-prometheus"]) == 0
    assert [o.prometheus for o in seen] == [True, False]
    assert cluster.UpOptions().prometheus  # on by default, as `cascade dev up`


def test_url_prometheus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = str(tmp_path)
    assert main(["dev", "--state-dir", state, "url", "prometheus"]) == 1
    assert "prometheus is not running" in capsys.readouterr().err
    paths = StatePaths(tmp_path)
    paths.prometheus.mkdir()
    (paths.prometheus / "url").write_text("http://127.0.0.1:9090\n")
    monkeypatch.setattr(monitor.processes, "running", lambda p, name: 4242)
    assert main(["dev", "--state-dir", state, "url", "prometheus"]) == 0
    assert capsys.readouterr().out.strip() == "http://127.0.0.1:9090"
