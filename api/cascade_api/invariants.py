"""Cross-field rules of a ModelDeployment, written once and enforced twice.

Clusters >= 1.25 evaluate them in the API server as CEL rules (`x-kubernetes-validations`
generated from `RULES`); older servers (the local 1.20 one) ignore CEL, so the operator
runs the same checks and marks the resource Degraded with a message naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cascade_api.modeldeployment import ModelDeploymentSpec


@dataclass(frozen=True)
class Rule:
    field: str  # the field a user must change, as a JSON path below the resource
    cel: str  # CEL over `self` = spec
    message: str
    holds: Callable[[ModelDeploymentSpec], bool]


RULES: tuple[Rule, ...] = (
    Rule(
        field="spec.scaling.minReplicas",
        cel="!has(self.scaling.maxReplicas)"
        " || self.scaling.minReplicas <= self.scaling.maxReplicas",
        message="spec.scaling.minReplicas must be <= spec.scaling.maxReplicas",
        holds=lambda s: s.scaling.min_replicas <= s.scaling.upper,
    ),
    Rule(
        field="spec.replicas",
        cel="self.replicas >= self.scaling.minReplicas && (!has(self.scaling.maxReplicas)"
        " || self.replicas <= self.scaling.maxReplicas)",
        message="spec.replicas must lie within [spec.scaling.minReplicas, "
        "spec.scaling.maxReplicas]",
        holds=lambda s: s.scaling.min_replicas <= s.replicas <= s.scaling.upper,
    ),
    Rule(
        field="spec.multicast.k",
        cel="self.multicast.k <= self.multicast.blocks",
        message="spec.multicast.k must be <= spec.multicast.blocks",
        holds=lambda s: s.multicast.k <= s.multicast.blocks,
    ),
    Rule(
        field="spec.slo.interactive.ttftMs",
        cel="self.slo.interactive.ttftMs <= self.slo.batch.ttftMs",
        message="spec.slo.interactive.ttftMs must be <= spec.slo.batch.ttftMs",
        holds=lambda s: s.slo.interactive.ttft_ms <= s.slo.batch.ttft_ms,
    ),
)


@dataclass(frozen=True)
class Violation:
    field: str
    message: str


def violations(spec: ModelDeploymentSpec) -> list[Violation]:
    """Every rule the spec breaks, in rule order (empty when valid)."""
    return [Violation(r.field, r.message) for r in RULES if not r.holds(spec)]


def cel_rules() -> list[dict[str, str]]:
    """The rules as `x-kubernetes-validations` entries on the spec schema."""
    return [{"rule": r.cel, "message": r.message} for r in RULES]
