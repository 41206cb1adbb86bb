"""`cascade top`'s frame: a snapshot drawn as lines no wider than the terminal.

Pure (snapshot, width, height in; lines out) so a frame is testable as text and the same
lines go to curses or, with `--once`, to stdout. Every line is cut to `width` and the
frame to `height`: a narrow or short terminal loses the right and the bottom of the
view, never the process.
"""

from __future__ import annotations

from collections.abc import Sequence

from cascade_cli.top_model import (
    CLASSES,
    MODES,
    ROLES,
    ClassView,
    DeploymentView,
    GatewayView,
    PlanView,
    Snapshot,
    TargetView,
)
from cascade_cli.units import seconds, size

BAR = 20  # progress bar cells
RECENT = 5  # finished plans listed at most
MAX_CELL = 60  # a table cell longer than this is cut (the autoscaler's reason can be long)
TITLES = ("DEPLOYMENTS", "SCALEPLANS", "RECENT")  # section titles (the curses layer bolds them)


def render(
    snap: Snapshot, width: int, height: int | None = None, interval_s: float | None = None
) -> list[str]:
    """The frame: header, deployments (with their gateway's queues), plans in flight with
    per-target progress, the last finished plans. `height` None: as long as it takes."""
    if width <= 0 or (height is not None and height <= 0):
        return []
    lines = [_header(snap, interval_s)]
    if snap.error:
        lines.append(f"! {snap.error}")
    lines += ["", *_deployments(snap), "", *_in_flight(snap)]
    recent = _recent(snap)
    if recent:
        lines += ["", *recent]
    if height is not None and len(lines) > height:
        more = len(lines) - height + 1
        lines = [*lines[: height - 1], f"... {more} more lines (a taller terminal shows them)"]
    return [fit(line, width) for line in lines]


def fit(line: str, width: int) -> str:
    line = line.rstrip()
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def _header(snap: Snapshot, interval_s: float | None) -> str:
    where = f"namespace {snap.scope}" if snap.scope else "all namespaces"
    every = f"   every {interval_s:g}s" if interval_s else ""
    at = snap.taken_at.strftime("%H:%M:%S")
    return f"cascade top   {where}{every}   {at}   q quit"


def _deployments(snap: Snapshot) -> list[str]:
    title = f"DEPLOYMENTS ({len(snap.deployments)})"
    if not snap.deployments:
        return [f"{title}   none"]
    head = ("NAME", "SPEC", "READY", "LOADING", "ROLES ready/pods", "MODES", "AUTOSCALER")
    rows: list[tuple[str, ...]] = []
    for d in snap.deployments:
        name = f"{d.namespace}/{d.name}" if not snap.scope else d.name
        if d.error:
            rows.append((name, "", "", "", d.error, "", ""))
            continue
        rows.append(
            (name, str(d.spec_replicas), str(d.ready), str(d.loading), _roles(d), _modes(d),
             d.autoscaler or "-")
        )  # fmt: skip
    table = _table(head, rows, right={1, 2, 3})
    out = [title, table[0]]
    for d, line in zip(snap.deployments, table[1:], strict=True):
        out.append(line)
        if not d.error:
            out.append(f"  gateway: {_gateway(d.gateway)}")
    return out


def _roles(d: DeploymentView) -> str:
    parts = [f"{r} {d.roles[r][0]}/{d.roles[r][1]}" for r in ROLES if r in d.roles]
    return "  ".join(parts) or "-"


def _modes(d: DeploymentView) -> str:
    parts = [f"{m} {d.modes[m]}" for m in MODES if d.modes.get(m)]
    return "  ".join(parts) or "-"


def _gateway(g: GatewayView) -> str:
    if g.error:
        return g.error
    parts = [_class(cls, g.classes[cls]) for cls in CLASSES if cls in g.classes]
    parts += [_class(cls, v) for cls, v in sorted(g.classes.items()) if cls not in CLASSES]
    parts.append(f"backends {g.backends_ready}/{g.backends_total} ready")
    return "  |  ".join(parts)


def _class(name: str, c: ClassView) -> str:
    ttft = f"{_dur(c.ttft_p50_s)}/{_dur(c.ttft_p99_s)}"
    return f"{name} queue {c.queued} running {c.in_flight} ttft p50/p99 {ttft}"


def _in_flight(snap: Snapshot) -> list[str]:
    plans = [p for p in snap.plans if p.in_flight]
    title = f"SCALEPLANS IN FLIGHT ({len(plans)})"
    if not plans:
        return [f"{title}   none"]
    out = [title]
    for p in plans:
        if p.error:
            out.append(f"{_plan_name(p, snap)}  {p.phase}  {p.error}")
            continue
        elapsed = _secs(p.elapsed_s) if p.elapsed_s is not None else "not started"
        done = sum(t.complete for t in p.targets)
        out.append(
            f"{_plan_name(p, snap)}  {p.phase}  {p.strategy}  targets {done}/{len(p.targets)}"
            f"  elapsed {elapsed}  predicted {_secs(p.predicted_s)}"
        )
        width = max((len(t.pod) for t in p.targets), default=0)
        out += [f"  {_target(t, width)}" for t in p.targets]
    return out


def _target(t: TargetView, width: int) -> str:
    frac = t.fraction
    filled = min(BAR, int(BAR * frac + 1e-9))
    bar = "[" + "█" * filled + "░" * (BAR - filled) + "]"
    moved = f"{size(t.bytes_received)}/{size(t.bytes_total)}" if t.bytes_total else "-"
    blocks = f"{t.blocks_total if t.complete else t.blocks_received}/{t.blocks_total}"
    return (
        f"{t.pod:<{width}}  {bar} {'done' if t.complete else f'{int(100 * frac)}%':>4}"
        f"  {moved:>17}  blocks {blocks:>7}"
        f"  predicted {_secs(t.predicted_s):>6}  measured {_secs(t.measured_s)}"
    )


def _recent(snap: Snapshot) -> list[str]:
    done = [p for p in snap.plans if not p.in_flight][-RECENT:]
    if not done:
        return []
    out = ["RECENT SCALEPLANS"]
    for p in reversed(done):
        if p.error:
            out.append(f"{_plan_name(p, snap)}  {p.phase}  {p.error}")
            continue
        line = f"{_plan_name(p, snap)}  {p.phase}  {p.strategy}  targets {len(p.targets)}"
        line += f"  predicted {_secs(p.predicted_s)}  measured {_secs(p.measured_s)}"
        if p.predicted_s and p.measured_s is not None:
            line += f" ({p.measured_s / p.predicted_s:.2f}x)"
        out.append(line)
    return out


def _plan_name(p: PlanView, snap: Snapshot) -> str:
    name = f"{p.namespace}/{p.name}" if not snap.scope else p.name
    return f"{name} ({p.deployment})"


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    """Columns as wide as their widest cell (cut at MAX_CELL), two spaces apart."""
    cells = [[_cut(x) for x in row] for row in [head, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    return [
        "  ".join(
            x.rjust(w) if i in right else x.ljust(w)
            for i, (x, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _dur(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"


def _secs(value: float | None) -> str:
    return "-" if value is None else seconds(value)
