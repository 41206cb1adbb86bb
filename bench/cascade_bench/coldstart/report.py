"""The cold-start document, its goals and its table (pure).

A row per mode: `to_first_token_s` (scale decision -> the first token from the new
instance), `ready_s` (decision -> the pod Ready), and `stages`: the new instance's
start-up stages as status.instances[].startup reports them, plus `first_token`
(Ready -> its first token, the bench's own request). Goals (issue 12): pool <= 0.5 x
storage; materialization removes >= 80 % of engine_init + kv_sizing + warmup; the host
tier holds hostCopies x the model whatever the replicas.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cascade_bench.coldstart.modes import CASES, MODES
from cascade_bench.table import format_rows

POOL_GOAL = 0.5
MATERIALIZED_GOAL = 0.8
ENGINE_STAGES = ("engine_init", "kv_sizing", "warmup")
HOST_TOLERANCE = 0.05  # packed blocks vs safetensors bytes on disk (headers, alignment)


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
    want = doc["host_copies"] * (doc.get("model_bytes") or 0)
    held = doc.get("host_bytes") or {}
    off = [k for k, v in held.items() if v is None or abs(v - want) > HOST_TOLERANCE * want]
    out.append(
        {
            "goal": "host memory held = hostCopies x model size at replicas 1, 6, 0",
            "holds": None if not held or not want else not off,
            "detail": f"want {want:,} B; held {held}",
        }
    )
    return out


def document(
    choices: Mapping[str, Any],
    rows: Mapping[str, Mapping[str, Any]],
    host_bytes: Mapping[str, int | None],
    wall_s: float,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "benchmark": "coldstart",
        "choices": dict(choices),
        "model_bytes": choices.get("model_bytes"),
        "host_copies": 1,
        "modes": dict(rows.get("zero_to_one", {})),
        "one_to_two": dict(rows.get("one_to_two", {})),
        "host_bytes": dict(host_bytes),
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
    lines += sorted(set(notes))
    for g in doc["goals"]:
        verdict = {True: "PASS", False: "FAIL", None: "n/a"}[g["holds"]]
        lines.append(f"goal {verdict}: {g['goal']}: {g['detail']}")
    return "\n".join(lines)
