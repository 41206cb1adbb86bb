"""The spec as the operator reads it: parsed and checked once per reconcile.

A spec the API server accepted can still break an invariant the 1.20 schema cannot
express (min > max, ...), or name a node path outside the directories this operator lets
pods read (a `file://` model outside its model roots: `file:///etc` would have a worker
read the node's /etc). Such a spec changes nothing that runs: the operator keeps the pods
of the last accepted spec and reports the violations, each naming its field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from cascade_api.invariants import Violation, violations
from cascade_api.modeldeployment import ModelDeploymentSpec


@dataclass(frozen=True)
class ParsedSpec:
    spec: ModelDeploymentSpec | None  # None when the schema itself refused it
    problems: list[Violation] = field(default_factory=list)

    @property
    def accepted(self) -> ModelDeploymentSpec | None:
        """The spec to act on, or None while it is invalid."""
        return self.spec if not self.problems else None


def parse_spec(raw: dict[str, Any], model_roots: tuple[str, ...] = ()) -> ParsedSpec:
    """The typed spec with the violations that name the offending fields; with
    `model_roots`, a `file://` model must lie below one of them."""
    try:
        spec = ModelDeploymentSpec.model_validate(raw)
    except ValidationError as err:
        found = []
        for e in err.errors():
            path = ".".join(["spec", *(to_camel(str(p)) for p in e["loc"])])
            found.append(Violation(path, f"{path}: {e['msg']}"))
        return ParsedSpec(None, found)
    return ParsedSpec(spec, violations(spec) + _outside_roots(spec.model.uri, model_roots))


def _outside_roots(uri: str, roots: tuple[str, ...]) -> list[Violation]:
    """A `file://` path below none of the roots (the URI pattern already refused '..'
    and '.' segments, so a prefix of whole segments is containment)."""
    if not roots or not uri.startswith("file://"):
        return []
    path = uri.removeprefix("file://").rstrip("/")
    if any(path == r.rstrip("/") or path.startswith(r.rstrip("/") + "/") for r in roots):
        return []
    allowed = ", ".join(roots)
    return [
        Violation(
            "spec.model.uri",
            f"spec.model.uri: {uri} is outside the model roots this operator allows "
            f"({allowed}; chart value models.fileRoots)",
        )
    ]
