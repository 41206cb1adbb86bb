"""The cold-start document, its goals and its table (pure).

A row per mode: `to_first_token_s` (scale decision -> the first token from the new
instance), `ready_s` (decision -> the pod Ready), and `stages`: the new instance's
start-up stages as status.instances[].startup reports them, plus `first_token`
(Ready -> its first token, the bench's own request). A restoring row also has
`profile_s` (what this run's profile Job measured for the work a restore replaces),
`restore_s` (what the instance's restore took, measured) and `saved_s`, their
difference. Memory is measured, not derived: `host_bytes` is the resident memory of the
host-copy pods at replicas 1, 6 and 0 (`host_block_bytes` beside it: the blocks they
report holding), `worker_rss_bytes` the workers' at the same moments, and
`host_copies` the deployment's spec.hostCopies. Goals (issue 12): pool <= 0.5 x
storage; materialization removes >= 80 % of engine_init + kv_sizing + warmup; the host
tier holds hostCopies x the model whatever the replicas (its RSS at least that, flat).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_bench.coldstart.modes import CASES, MODES
from cascade_bench.table import format_rows

POOL_GOAL = 0.5
MATERIALIZED_GOAL = 0.8
ENGINE_STAGES = ("engine_init", "kv_sizing", "warmup")
# Of the model's size: how far the host tier's RSS may fall short of hostCopies x the
# model (packed blocks vs safetensors bytes on disk) or move across replicas.
HOST_TOLERANCE = 0.05
# The worker status's materialization fields a restoring row copies (camelCase there).
RESTORE_FIGURES = {"profile_s": "profileS", "restore_s": "restoreS", "saved_s": "savedS"}


@dataclass(frozen=True)
class HostMemory:
    """What the pool mode measured at each replicas count (`replicas_N` keys)."""

    copies: int | None = None  # the deployment's spec.hostCopies (None: not measured)
    held: Mapping[str, int | None] = field(default_factory=dict)  # host-copy pods' RSS
    blocks: Mapping[str, int | None] = field(default_factory=dict)  # their bytesHeld
    workers: Mapping[str, int | None] = field(default_factory=dict)  # worker pods' RSS


def spec_host_copies(spec: Mapping[str, Any]) -> int:
    """spec.hostCopies as the operator reads it (the API's default when unset)."""
    return ModelDeploymentSpec.model_validate(dict(spec)).host_copies


def restore_figures(materialization: Mapping[str, Any] | None) -> dict[str, float]:
    """A restoring instance's measured profile, restore and saved seconds ({}: none)."""
    shown = materialization or {}
    return {k: float(shown[v]) for k, v in RESTORE_FIGURES.items() if shown.get(v) is not None}


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _engine_s(row: Mapping[str, Any]) -> float | None:
    stages = row.get("stages") or {}
    got = [stages[s] for s in ENGINE_STAGES if s in stages]
    return sum(got) if got else None


def goals(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = doc["modes"]
    storage, pool = rows.get("storage", {}), rows.get("pool", {})
    r = _ratio(pool.get("to_first_token_s"), storage.get("to_first_token_s"))
    out = [
        {
            "goal": f"pool <= {POOL_GOAL:g} x storage (to first token, 0 -> 1)",
            "holds": None if r is None else r <= POOL_GOAL,
            "detail": "-" if r is None else f"{r:.2f} x",
        }
    ]
    cold, warm = _engine_s(storage), _engine_s(rows.get("storage_materialized", {}))
    saved = None if cold is None or warm is None or not cold else 1 - warm / cold
    out.append(
        {
            "goal": f"materialization removes >= {MATERIALIZED_GOAL:.0%} of engine start-up",
            "holds": None if saved is None else saved >= MATERIALIZED_GOAL,
            "detail": "-" if saved is None else f"{saved:.0%} removed ({cold:.2f} -> {warm:.2f} s)",
        }
    )
    out.append(_host_goal(doc))
    return out


def _host_goal(doc: Mapping[str, Any]) -> dict[str, Any]:
    want = (doc.get("host_copies") or 0) * (doc.get("model_bytes") or 0)
    held = doc.get("host_bytes") or {}
    got = [v for v in held.values() if v is not None]
    holds = None
    if held and want:
        slack = HOST_TOLERANCE * want
        holds = len(got) == len(held) and min(got) >= want - slack and max(got) - min(got) <= slack
    over = f"; over the model {min(got) - want:+,} B" if got and want else ""
    return {
        "goal": "host memory held (RSS) >= hostCopies x model size, flat at replicas 1, 6, 0",
        "holds": holds,
        "detail": f"want >= {want:,} B, within {HOST_TOLERANCE:.0%}; held {dict(held)}{over}",
    }


def document(
    choices: Mapping[str, Any],
    rows: Mapping[str, Mapping[str, Any]],
    memory: HostMemory,
    wall_s: float,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "benchmark": "coldstart",
        "choices": dict(choices),
        "model_bytes": choices.get("model_bytes"),
        "host_copies": memory.copies,
        "modes": dict(rows.get("zero_to_one", {})),
        "one_to_two": dict(rows.get("one_to_two", {})),
        "host_bytes": dict(memory.held),
        "host_block_bytes": dict(memory.blocks),
        "worker_rss_bytes": dict(memory.workers),
        "wall_s": wall_s,
    }
    doc["goals"] = goals(doc)
    return doc


# Start-up order; `other` is what no stage covers: the operator noticing the scale,
# creating the pod and the plan, its orders, the readiness probe's period.
ORDER = (
    "scheduled", "process", "imports", "weights", "kv_sizing", "engine_init", "warmup",
    "first_token", "other",
)  # fmt: skip


def stage_names(doc: Mapping[str, Any]) -> list[str]:
    seen: set[str] = set()
    for case in CASES:
        for row in (doc["modes"] if case == "zero_to_one" else doc["one_to_two"]).values():
            seen |= set(row.get("stages") or {})
    return [s for s in ORDER if s in seen] + sorted(seen - set(ORDER))


def table(doc: Mapping[str, Any]) -> str:
    names = stage_names(doc)
    lines: list[str] = []
    notes: list[str] = []
    for case in CASES:
        rows = doc["modes"] if case == "zero_to_one" else doc["one_to_two"]
        out = []
        for mode in MODES:
            row = rows.get(mode)
            if row is None:
                continue
            if row.get("skipped"):
                out.append([mode, "-", "skipped"] + ["-"] * len(names))
                notes.append(f"{mode}: skipped: {row['skipped']}")
                continue
            stages = row.get("stages") or {}
            out.append(
                [mode, f"{row['to_first_token_s']:.2f}", str(row.get("weights_from") or "-")]
                + [f"{stages[s]:.2f}" if s in stages else "-" for s in names]
            )
        lines.append(f"{case.replace('_', ' ')}:")
        lines.append(format_rows([["mode", "to first token s", "from", *names], *out]))
    lines += sorted(set(notes)) + _measured(doc)
    for g in doc["goals"]:
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[g["holds"]]
        lines.append(f"goal {verdict}: {g['goal']}: {g['detail']}")
    return "\n".join(lines)


def _mib(value: Any) -> str:
    return "-" if value is None else f"{value / (1 << 20):,.1f}"


def _measured(doc: Mapping[str, Any]) -> list[str]:
    """The restores' measured seconds and the memory readings, one line each."""
    lines = []
    for case in CASES:
        row = (doc["modes"] if case == "zero_to_one" else doc["one_to_two"]).get(
            "storage_materialized"
        ) or {}
        if "restore_s" in row and "profile_s" in row:
            lines.append(
                f"materialized {case.replace('_', ' ')}: restore {row['restore_s']:.3f} s of a "
                f"{row['profile_s']:.3f} s profile: saved {row.get('saved_s', 0.0):.3f} s"
            )
    for label, key in (("host tier RSS", "host_bytes"), ("workers RSS", "worker_rss_bytes")):
        if doc.get(key):
            shown = ", ".join(f"{k} {_mib(v)}" for k, v in doc[key].items())
            lines.append(f"{label} (MiB): {shown}")
    return lines
