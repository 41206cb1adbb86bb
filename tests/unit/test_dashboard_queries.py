"""The Grafana dashboard reads only series that exist, and its helper yields plain PromQL.

Known series come from docs/observability.md (its tables, and the gateway's and workers'
short names in prose) and from the gateway's and workers' own registries
(prometheus_client adds `_total` to counters and `_bucket`/`_sum`/`_count` to
histograms on exposition).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from dashboard_queries import (
    DASHBOARD,
    dashboard_variables,
    iter_panels,
    load_dashboard,
    metric_names,
    panel_queries,
    raw_queries,
    selectors,
    substitute,
    variable_selectors,
)
from prometheus_client import CollectorRegistry

from cascade_gateway.config import GatewayConfig
from cascade_gateway.metrics import register_metrics
from cascade_operator.metrics import OperatorMetrics
from cascade_worker.serving.metrics import ServingMetrics

DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"

# What the dashboard must show (issue 14): one series of each.
REQUIRED = {
    "cascade_operator_instances",
    "cascade_operator_autoscaler_desired_replicas",
    "cascade_gateway_queue_depth",
    "cascade_gateway_time_to_first_token_seconds_bucket",
    "cascade_gateway_inter_token_latency_seconds_bucket",
    "cascade_gateway_ttft_slo_met_total",
    "cascade_gateway_time_to_first_token_seconds_count",
    "cascade_gateway_generated_tokens_total",
    "cascade_operator_scaleplans_total",
    "cascade_operator_scaleplan_transfer_seconds_sum",
    "cascade_operator_scaleplan_transfer_seconds_count",
    "cascade_operator_startup_stage_seconds_sum",
    "cascade_operator_startup_stage_seconds_count",
    "cascade_worker_requests_running",
    "cascade_operator_autoscaler_reason",
    "cascade_operator_autoscaler_backpressure",
}


def exposed(name: str, kind: str) -> set[str]:
    """The sample names a family of `kind` exposes."""
    if kind == "counter":
        return {name if name.endswith("_total") else f"{name}_total"}
    if kind == "histogram":
        return {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    if kind == "info":
        return {f"{name}_info"}
    return {name}


def section(text: str, heading: str) -> str:
    """A `## heading...` section of a markdown page, up to the next `## `."""
    start = text.index("\n## " + heading)
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def documented() -> tuple[set[str], dict[str, set[str]]]:
    """Series names in docs/observability.md's series sections, and the labels its
    tables give them. Only those sections: the chart section lists what the dashboard
    reads, so counting it would make the check below circular."""
    page = DOCS.read_text()
    text = section(page, "Operator series") + section(page, "Gateway and worker series")
    names: set[str] = set()
    labels: dict[str, set[str]] = {}
    for row in re.finditer(r"^\| `(cascade_\w+)` \| (\w+) \| ([^|]*) \|", text, re.M):
        name, kind = row.group(1), row.group(2)
        for sample in exposed(name, kind):
            names.add(sample)
            labels[sample] = {label.strip() for label in row.group(3).split(",")}
    names |= set(re.findall(r"`(cascade_[a-z0-9_]*[a-z0-9])`", text))
    # The gateway and worker paragraph names series by suffix after their prefix.
    gateway_worker = section(page, "Gateway and worker series")
    for prefix, part in zip(
        ("cascade_gateway_", "cascade_worker_"),
        gateway_worker.split("Worker (`cascade_worker_*`)", 1),
        strict=False,
    ):
        # Series suffixes have an underscore (`ttft_slo_met_total`); `batch` is a class.
        names |= {prefix + short for short in re.findall(r"`([a-z][a-z0-9]*_[a-z0-9_]+)`", part)}
    return names, labels


def registered() -> set[str]:
    gateway = CollectorRegistry()
    config = GatewayConfig(host="", port=0, model_name="m", deployment="d", drain_seconds=0)
    register_metrics(gateway, config)
    worker = CollectorRegistry()
    ServingMetrics(worker)
    return {
        sample
        for registry in (gateway, worker)
        for family in registry.collect()
        for sample in exposed(family.name, family.type)
    }


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    board: dict[str, Any] = load_dashboard()
    return board


def used_names(dashboard: dict[str, Any]) -> set[str]:
    return {
        name for panel in raw_queries(dashboard) for e in panel.exprs for name in metric_names(e)
    }


def test_every_panel_has_a_query(dashboard: dict[str, Any]) -> None:
    panels = raw_queries(dashboard)
    assert len(panels) >= 13
    for panel in panels:
        assert panel.title
        assert panel.exprs, f"panel {panel.title!r} has no query"
    titles = [p.title for p in panels]
    assert len(titles) == len(set(titles)), "panel titles repeat"


def test_every_series_the_dashboard_reads_exists(dashboard: dict[str, Any]) -> None:
    docs, _ = documented()
    known = docs | registered()
    unknown = used_names(dashboard) - known
    assert not unknown, f"not in docs/observability.md nor the metrics modules: {unknown}"


def test_operator_series_the_dashboard_reads_are_registered(dashboard: dict[str, Any]) -> None:
    """The docs' tables and the operator's registry agree on what the dashboard reads."""
    operator = OperatorMetrics()
    exposed_by_operator = {
        sample
        for family in operator.registry.collect()
        for sample in exposed(family.name, family.type)
    }
    wanted = {n for n in used_names(dashboard) if n.startswith("cascade_operator_")}
    assert wanted
    assert not wanted - exposed_by_operator


def test_the_dashboard_shows_what_issue_14_asks_for(dashboard: dict[str, Any]) -> None:
    assert not REQUIRED - used_names(dashboard)


def test_operator_series_use_only_their_documented_labels(dashboard: dict[str, Any]) -> None:
    _, labels = documented()
    for panel in raw_queries(dashboard):
        for expr in panel.exprs:
            grouped = {
                label.strip()
                for clause in re.findall(r"\b(?:by|without)\s*\(([^()]*)\)", expr)
                for label in clause.split(",")
            }
            for name, matchers in selectors(expr):
                if name in labels:
                    used = set(re.findall(r"(\w+)\s*[=!]~?", matchers)) | grouped
                    assert used - {"le"} <= labels[name], (panel.title, name, used)


def test_every_selector_is_scoped_to_the_chosen_deployment(dashboard: dict[str, Any]) -> None:
    for panel in raw_queries(dashboard):
        for expr in panel.exprs:
            found = selectors(expr)
            assert {name for name, _ in found} == metric_names(expr), expr
            for name, matchers in found:
                assert 'namespace="$namespace"' in matchers, (panel.title, name)
                assert 'deployment="$deployment"' in matchers, (panel.title, name)


def test_quantiles_keep_the_bucket_label(dashboard: dict[str, Any]) -> None:
    for panel in raw_queries(dashboard):
        for expr in panel.exprs:
            if "histogram_quantile" in expr:
                assert re.search(r"by \([^)]*\ble\b", expr), expr
                assert all(n.endswith("_bucket") for n in metric_names(expr)), expr


def test_panels_use_the_datasource_variable(dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "deployment"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    for panel in iter_panels(dashboard):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]


def test_panels_fit_the_grid_and_ids_are_unique(dashboard: dict[str, Any]) -> None:
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]


def test_panel_queries_substitute_every_variable(dashboard: dict[str, Any]) -> None:
    panels = panel_queries("team-a", "llama", dashboard)
    assert [p.title for p in panels] == [p.title for p in raw_queries(dashboard)]
    for panel in panels:
        for expr in panel.exprs:
            assert "$" not in expr and "[[" not in expr, expr
            for _, matchers in selectors(expr):
                assert 'namespace="team-a"' in matchers
                assert 'deployment="llama"' in matchers
    [ttft] = [p for p in panels if p.title.startswith("Time to first token")]
    assert "[1m]" in ttft.exprs[0]
    faster = panel_queries("team-a", "llama", dashboard, __rate_interval="30s")
    assert any("[30s]" in e for p in faster for e in p.exprs)


def test_panel_queries_default_to_the_shipped_dashboard() -> None:
    assert DASHBOARD.is_file()
    assert panel_queries("ns", "md") == panel_queries("ns", "md", load_dashboard())


def test_variable_selectors() -> None:
    found = variable_selectors(namespace="team-a")
    assert found["namespace"] == ("cascade_operator_instances", "namespace")
    assert found["deployment"] == ('cascade_operator_instances{namespace="team-a"}', "deployment")


def test_substitute_forms_and_unknown_variables() -> None:
    variables = dashboard_variables("ns", "md")
    assert variables["datasource"] == "prometheus"
    assert substitute(
        'a{n="$namespace"}[$__rate_interval] ${deployment} [[namespace]]', variables
    ) == ('a{n="ns"}[1m] md ns')
    assert substitute("${deployment:regex}", variables) == "md"
    with pytest.raises(KeyError, match="nope"):
        substitute('x{a="$nope"}', variables)


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('rate(a_total{b="c"}[5m])', {"a_total"}),
        ("histogram_quantile(0.99, sum by (le, class) (rate(x_bucket[1m])))", {"x_bucket"}),
        ("sum by (k) (a) / on (k) group_left (z) b > bool 0.5", {"a", "b"}),
        ('max by (reason) (r{q="x y", s=~"a|b"}) > 0', {"r"}),
        ("a offset 5m and b unless c", {"a", "b", "c"}),
        ("1e3 * Inf + NaN", set()),
        ("up", {"up"}),
    ],
)
def test_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_selectors_ignore_braces_in_strings() -> None:
    assert selectors('a{b="{x}"} + c{d="e"}') == [("a", 'b="{x}"'), ("c", 'd="e"')]


def test_docs_and_registries_are_parsed() -> None:
    docs, labels = documented()
    assert "cascade_operator_instances" in docs
    assert "cascade_operator_startup_stage_seconds_bucket" in docs
    assert labels["cascade_operator_instances"] == {
        "namespace",
        "deployment",
        "role",
        "mode",
        "phase",
    }
    assert "cascade_gateway_ttft_slo_met_total" in docs
    known = registered()
    assert "cascade_gateway_generated_tokens_total" in known
    assert "cascade_worker_requests_running" in known
    assert "cascade_gateway_time_to_first_token_seconds_count" in known
