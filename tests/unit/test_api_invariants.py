"""Cross-field rules: each one bites, names its field, and says the same in CEL and Python.

Rules are written once in `cascade_api.invariants` and enforced twice: as CEL by API
servers >= 1.25 and by the operator on older ones. The CEL here is a tiny subset
(field paths, comparisons, `&&`), so the test evaluates it over the spec's API dict and
checks it agrees with the Python predicate on every crafted spec.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from cascade_api.crd import model_deployment_crd
from cascade_api.invariants import RULES, Rule, cel_rules, violations
from cascade_api.modeldeployment import ModelDeploymentSpec

URI = {"uri": "file:///models/x"}

# One spec per rule that breaks it (and as few others as possible).
BREAKING: dict[str, dict[str, Any]] = {
    "spec.scaling.minReplicas": {"replicas": 2, "scaling": {"minReplicas": 5, "maxReplicas": 2}},
    "spec.replicas": {"replicas": 20, "scaling": {"minReplicas": 1, "maxReplicas": 16}},
    "spec.multicast.k": {"multicast": {"blocks": 4, "k": 8}},
    "spec.slo.interactive.ttftMs": {"slo": {"interactive": {"ttftMs": 90_000}}},
}
EDGE_VALID: list[dict[str, Any]] = [
    {"replicas": 0, "scaling": {"minReplicas": 0, "maxReplicas": 1}},
    {"replicas": 4, "scaling": {"minReplicas": 4, "maxReplicas": 4}},
    {"replicas": 40, "scaling": {"minReplicas": 2}},  # no maxReplicas: kubectl scale owns it
    {"multicast": {"blocks": 2, "k": 2}},
    {"slo": {"interactive": {"ttftMs": 60_000}}},
]
CASES: list[dict[str, Any]] = [*BREAKING.values(), *EDGE_VALID, {}]


def spec(extra: dict[str, Any]) -> ModelDeploymentSpec:
    return ModelDeploymentSpec.model_validate({"model": URI, **extra})


def _ns(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _ns(v) for k, v in value.items()})
    return value


def eval_cel(rule: str, s: ModelDeploymentSpec) -> bool:
    """Evaluate the CEL subset the rules use over the spec as the API server stores it."""
    assert re.fullmatch(r"[\w.\s<>=!&|()]+", rule), f"CEL outside the tested subset: {rule}"
    expr = rule.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!has\(self\.([\w.]+)\)", r'not has("\1")', expr)
    stored = s.to_api()

    def has(path: str) -> bool:
        node: Any = stored
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    result = eval(expr, {"__builtins__": {}, "has": has}, {"self": _ns(stored)})
    assert isinstance(result, bool)
    return result


def test_every_rule_has_a_breaking_case() -> None:
    assert {r.field for r in RULES} == set(BREAKING)


@pytest.mark.parametrize("rule", RULES, ids=[r.field for r in RULES])
def test_rule_passes_on_the_default_spec(rule: Rule) -> None:
    assert rule.holds(spec({}))
    assert eval_cel(rule.cel, spec({}))


@pytest.mark.parametrize("rule", RULES, ids=[r.field for r in RULES])
def test_rule_fails_on_a_crafted_spec(rule: Rule) -> None:
    bad = spec(BREAKING[rule.field])
    assert not rule.holds(bad)
    assert not eval_cel(rule.cel, bad)
    found = violations(bad)
    assert rule.field in [v.field for v in found]
    assert rule.message in [v.message for v in found]


@pytest.mark.parametrize("extra", EDGE_VALID, ids=range(len(EDGE_VALID)))
def test_boundary_specs_pass(extra: dict[str, Any]) -> None:
    assert violations(spec(extra)) == []


@pytest.mark.parametrize("rule", RULES, ids=[r.field for r in RULES])
@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_cel_and_python_agree(rule: Rule, case: dict[str, Any]) -> None:
    s = spec(case)
    assert eval_cel(rule.cel, s) == rule.holds(s)


@pytest.mark.parametrize("rule", RULES, ids=[r.field for r in RULES])
def test_message_and_cel_name_the_field(rule: Rule) -> None:
    assert rule.field.startswith("spec.")
    assert rule.field in rule.message
    assert "self." + rule.field.removeprefix("spec.") in rule.cel


def test_violations_empty_on_default_and_in_rule_order() -> None:
    assert violations(spec({})) == []
    found = violations(spec({"replicas": 3, "scaling": {"minReplicas": 5, "maxReplicas": 2}}))
    assert [v.field for v in found] == ["spec.scaling.minReplicas", "spec.replicas"]


def test_cel_rules_are_in_the_generated_spec_schema() -> None:
    version = model_deployment_crd()["spec"]["versions"][0]
    validations = version["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "x-kubernetes-validations"
    ]
    assert validations == cel_rules()
    assert [v["rule"] for v in validations] == [r.cel for r in RULES]
    assert all(v["message"] for v in validations)


@pytest.mark.parametrize(
    ("scaling", "owner"),
    [
        ({}, "External"),  # no maxReplicas: a fixed count kubectl scale owns
        ({"minReplicas": 2, "maxReplicas": 2}, "External"),
        ({"minReplicas": 1, "maxReplicas": 8}, "Cascade"),
        ({"minReplicas": 0, "maxReplicas": 1}, "Cascade"),
        ({"minReplicas": 1, "maxReplicas": 8, "autoscaler": "External"}, "External"),
        ({"minReplicas": 2, "maxReplicas": 2, "autoscaler": "Cascade"}, "Cascade"),
    ],
)
def test_owner_of_replicas_defaults_by_bounds(scaling: dict[str, Any], owner: str) -> None:
    assert spec({"scaling": scaling}).scaling.owner == owner
