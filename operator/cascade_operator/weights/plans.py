"""ScalePlan objects: the typed view the lifecycle reads and the manifest it creates.

Plan names are derived, not counted: `<md>-g<generation>-<hash of digest and targets>`
(a `-N` suffix only when a finished plan already has the name). An operator killed
between deciding and creating re-derives the same name after a restart and gets an
AlreadyExists instead of a second plan. The repair attempt travels as a label, so the
number of tries per target is rebuilt from the API too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cascade_api import constants as c
from cascade_api.scaleplan import PlanPhase, ScalePlanSpec, ScalePlanStatus
from cascade_operator.builders import labels, owner_reference
from cascade_operator.observed import MdRef, parse_time

Manifest = dict[str, Any]

COMPONENT_PLAN = "scaleplan"
ATTEMPT_LABEL = f"{c.GROUP}/attempt"
ACTIVE = (PlanPhase.PENDING, PlanPhase.RUNNING)
MAX_NAME = 253


@dataclass(frozen=True)
class PlanView:
    name: str
    spec: ScalePlanSpec
    status: ScalePlanStatus
    created: datetime | None = None
    attempt: int = 1  # 1 for a first plan, n + 1 for the n-th repair of its targets
    # When this operator last wrote the status (the controller's memory; None after a
    # restart). Only the write throttle uses it.
    last_patch: datetime | None = None

    @property
    def active(self) -> bool:
        return self.status.phase in ACTIVE

    @classmethod
    def of(cls, body: Manifest, last_patch: datetime | None = None) -> PlanView:
        meta = body.get("metadata") or {}
        raw_attempt = (meta.get("labels") or {}).get(ATTEMPT_LABEL, "1")
        return cls(
            name=meta["name"],
            spec=ScalePlanSpec.model_validate(body.get("spec") or {}),
            status=ScalePlanStatus.model_validate(body.get("status") or {}),
            created=parse_time(meta.get("creationTimestamp")),
            attempt=int(raw_attempt) if str(raw_attempt).isdigit() else 1,
            last_patch=last_patch,
        )


def plan_name(
    md: str, generation: int, digest: str, targets: Collection[str], taken: Collection[str]
) -> str:
    """The deterministic name of a plan for these targets (see the module docstring)."""
    key = "\n".join([digest, *sorted(targets)]).encode()
    tail = f"-g{generation}-{hashlib.sha256(key).hexdigest()[:8]}"
    base = md[: MAX_NAME - len(tail) - 4] + tail
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def plan_manifest(ref: MdRef, name: str, spec: ScalePlanSpec, attempt: int) -> Manifest:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.SP_KIND,
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": labels(ref.name, COMPONENT_PLAN) | {ATTEMPT_LABEL: str(attempt)},
            "ownerReferences": [owner_reference(ref)],
        },
        "spec": spec.to_api(),
    }


def plan_selector(md: str) -> str:
    """Label selector of a deployment's ScalePlans (for the I/O layer's list)."""
    return f"{c.LABEL_DEPLOYMENT}={md},{c.LABEL_COMPONENT}={COMPONENT_PLAN}"


def by_age(plans: Sequence[PlanView]) -> list[PlanView]:
    """Oldest first; plans without a timestamp (not yet read back) sort by name, last."""
    return sorted(plans, key=lambda p: (p.created is None, p.created or datetime.min, p.name))
