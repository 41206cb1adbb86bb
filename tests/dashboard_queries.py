"""The Grafana dashboard's queries as plain PromQL, for tests that run them.

charts/cascade/dashboards/cascade.json writes its queries with Grafana's variables
(`$namespace`, `$deployment`, `${datasource}`, `$__rate_interval`, `$__range`); Prometheus
knows none of them. `panel_queries` lists every panel's title and its expressions with
the variables substituted, so a test can send each one to a real Prometheus
(`/api/v1/query`) and check that it parses and returns series; `metric_names` says which
series an expression reads. Pure: reads the JSON file, no Grafana, no Prometheus.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "charts" / "cascade" / "dashboards" / "cascade.json"

# What Grafana's built-in variables stand for when a test runs a query itself: the rate
# window ($__rate_interval: four scrape intervals at a 15s scrape), the dashboard's time
# range ($__range) and the step ($__interval).
BUILTINS: Mapping[str, str] = {"__rate_interval": "1m", "__range": "1h", "__interval": "15s"}

Panel = dict[str, Any]

# $name, ${name}, ${name:format} and the deprecated [[name]].
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
# PromQL words that are not series names.
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
    | {"group_left", "group_right", "inf", "nan", "atan2"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
# Possessive `*+`: in `max (` the name is a call, not `ma` followed by `x`.
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*+)(?!\s*\()")


@dataclass(frozen=True)
class PanelQueries:
    """One panel: its title and its targets' expressions, variables substituted."""

    title: str
    exprs: tuple[str, ...]


def load_dashboard(path: Path = DASHBOARD) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def iter_panels(dashboard: Mapping[str, Any]) -> Iterator[Panel]:
    """Every panel that shows data, in order; rows (and a collapsed row's panels, which
    Grafana nests inside it) are walked, not returned."""
    for panel in dashboard.get("panels", []):
        if panel.get("type") == "row":
            yield from iter_panels(panel)
        else:
            yield panel


def substitute(text: str, variables: Mapping[str, str]) -> str:
    """Replace every Grafana variable; one not in `variables` raises KeyError, so a new
    variable in the dashboard cannot slip past a test unsubstituted."""

    def value(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group is not None)
        if name not in variables:
            raise KeyError(f"no value for dashboard variable ${name} in {text!r}")
        return variables[name]

    return _VARIABLE.sub(value, text)


def dashboard_variables(
    namespace: str, deployment: str, datasource: str = "prometheus", **builtins: str
) -> dict[str, str]:
    """The dashboard's variables (and Grafana's built-ins, overridable by keyword:
    `__rate_interval="30s"`) for one ModelDeployment."""
    return {
        **BUILTINS,
        **builtins,
        "namespace": namespace,
        "deployment": deployment,
        "datasource": datasource,
    }


def raw_queries(dashboard: Mapping[str, Any] | None = None) -> list[PanelQueries]:
    """Every panel's title and expressions as the dashboard writes them (variables in)."""
    board = load_dashboard() if dashboard is None else dashboard
    return [
        PanelQueries(
            title=str(panel.get("title", "")),
            exprs=tuple(str(t["expr"]) for t in panel.get("targets", []) if t.get("expr")),
        )
        for panel in iter_panels(board)
    ]


def panel_queries(
    namespace: str,
    deployment: str,
    dashboard: Mapping[str, Any] | None = None,
    **builtins: str,
) -> list[PanelQueries]:
    """Every panel's title and PromQL, ready for Prometheus' query API."""
    variables = dashboard_variables(namespace, deployment, **builtins)
    return [
        PanelQueries(p.title, tuple(substitute(e, variables) for e in p.exprs))
        for p in raw_queries(dashboard)
    ]


def variable_selectors(
    dashboard: Mapping[str, Any] | None = None, **values: str
) -> dict[str, tuple[str, str]]:
    """The query variables' `label_values(selector, label)` as (series selector, label)
    with earlier variables substituted from `values`: `/api/v1/series?match[]=selector`
    lists what Grafana would offer."""
    board = load_dashboard() if dashboard is None else dashboard
    found: dict[str, tuple[str, str]] = {}
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        match = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", query)
        if match is None:
            raise ValueError(f"variable {var['name']}: not label_values(...): {query!r}")
        found[var["name"]] = (substitute(match.group(1), values), match.group(2))
    return found


def metric_names(expr: str) -> set[str]:
    """The series names an expression reads (`rate(x_total{a="b"}[1m])` -> {x_total}).

    Not a PromQL parser: strings, label matchers, ranges and grouping clauses are cut
    out, and what is left that looks like an identifier and is not a function call, a
    keyword or a number is a series name. Enough for the dashboard's expressions.
    """
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    return {
        name
        for name in _IDENTIFIER.findall(text)
        if name.lower() not in _KEYWORDS and not re.fullmatch(r"[0-9eE]+", name)
    }


def selectors(expr: str) -> list[tuple[str, str]]:
    """Each `name{matchers}` in an expression as (name, matchers text)."""
    text = _STRING.sub(lambda m: "_" * len(m.group(0)), expr)  # keep offsets
    return [
        (m.group(1), expr[m.start(2) : m.end(2)])
        for m in re.finditer(r"([A-Za-z_:][\w:]*)\s*\{([^{}]*)\}", text)
    ]
