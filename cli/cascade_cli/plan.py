"""`cascade plan show NAME [-n NS]`: a ScalePlan drawn in the terminal.

What `kubectl get sp` cannot show: the plan's shape (serial-forwarding chains
`s0 ─▶ t1 ─▶ t2`, or the binomial pipeline as the tree of who first sends to whom plus
its steps), per-target progress bars (blocks received of all, predicted vs measured
completion), the execution pipelines that can serve while loading (members and their
layers, predicted ready time, state, measured times), and the planner's reason.
`render` is pure (a plan object and `now` in, text out) and tested on fixtures; the I/O
around it reads the object with the kubernetes client (or `-f FILE`).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from cascade_api import constants as c
from cascade_api.base import utcnow
from cascade_api.scaleplan import (
    PipelineState,
    PipelineStatus,
    PlanPhase,
    PlanStrategy,
    ScalePlanSpec,
    ScalePlanStatus,
    TargetProgress,
)
from cascade_cli.units import seconds, size

ARROW = " ─▶ "
BAR = 20  # progress bar width in cells
MAX_STEPS = 12  # binomial steps shown before "... more"
MAX_TREE = 40  # tree lines shown before "... more"
FINAL = (PlanPhase.COMPLETED, PlanPhase.FAILED, PlanPhase.CANCELLED)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = sub.add_parser("plan", help="look at ScalePlans (planned weight transfers)")
    cmds = group.add_subparsers(dest="plan_cmd", required=True, metavar="COMMAND")
    show = cmds.add_parser("show", help="draw a ScalePlan: its chains or tree, progress")
    show.add_argument("name", metavar="NAME", nargs="?", help="the ScalePlan's name")
    show.add_argument("-n", "--namespace", default="default")
    show.add_argument("-f", "--file", type=Path, help="read the plan from a YAML/JSON file")
    show.add_argument("-w", "--watch", action="store_true", help="redraw until it ends")
    show.set_defaults(func=_show)


def _show(args: argparse.Namespace) -> int:
    if args.name is None and args.file is None:
        raise ValueError("give a ScalePlan NAME or -f FILE")
    while True:
        body = _read(args)
        text = render(body, utcnow())
        if not args.watch:
            print(text)
            return 0
        sys.stdout.write("\x1b[H\x1b[2J" + text + "\n")
        sys.stdout.flush()
        if (body.get("status") or {}).get("phase") in FINAL:
            return 0
        time.sleep(1.0)


def _read(args: argparse.Namespace) -> dict[str, Any]:
    if args.file is not None:
        import yaml

        doc: dict[str, Any] = yaml.safe_load(args.file.read_text())
        return doc
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    try:
        config.load_kube_config()
    except config.ConfigException:
        config.load_incluster_config()
    try:
        found: dict[str, Any] = client.CustomObjectsApi().get_namespaced_custom_object(
            c.GROUP, c.VERSION, args.namespace, c.SP_PLURAL, args.name
        )
    except ApiException as err:
        if err.status == 404:
            raise RuntimeError(f"scaleplan {args.name} not found in {args.namespace}") from None
        raise RuntimeError(f"reading scaleplan {args.name}: {err.reason}") from None
    return found


def render(body: dict[str, Any], now: datetime) -> str:
    """The whole picture of one ScalePlan object (a dict as the API returns it)."""
    spec = ScalePlanSpec.model_validate(body.get("spec") or {})
    status = ScalePlanStatus.model_validate(body.get("status") or {})
    name = (body.get("metadata") or {}).get("name", "?")
    lines = [*_header(name, spec, status, now), ""]
    shape = _chains(spec) if spec.strategy == PlanStrategy.CHAIN else _binomial(spec)
    lines += [*shape, "", *_targets(spec, status), *_pipelines(spec, status)]
    conds = [f"  {x.type}={x.status} {x.reason}: {x.message}" for x in status.conditions]
    if conds:
        lines += ["", "conditions", *conds]
    return "\n".join(lines)


def _header(name: str, spec: ScalePlanSpec, status: ScalePlanStatus, now: datetime) -> list[str]:
    phase = status.phase
    progress = status.progress or f"0/{len(spec.targets)}"
    out = [
        f"ScalePlan {name}   deployment {spec.deployment}   model {spec.model_digest[:24]}",
        f"phase {phase}   strategy {spec.strategy}   targets complete {progress}   "
        f"blocks {len(spec.blocks)} ({size(sum(b.bytes for b in spec.blocks))})   "
        f"moved {size(status.bytes_moved)}",
    ]
    if status.start_time is None:
        elapsed = "not started"
    else:
        end = status.completion_time or now
        elapsed = f"{seconds((end - status.start_time).total_seconds())}"
    predicted = spec.predicted_completion_seconds
    measured = status.measured_completion_seconds
    line = f"elapsed {elapsed} (dispatch to last write)   transfer: predicted "
    line += f"{seconds(predicted) if predicted is not None else '-'}   measured "
    line += f"{seconds(measured) if measured is not None else '-'}"
    if predicted and measured is not None:
        line += f" ({measured / predicted:.2f}x)"
    out = [*out, line]
    tiers = ", ".join(f"{s.pod} ({s.tier})" for s in spec.sources)
    out.append(f"sources {tiers or '-'}")
    if spec.reason:
        out.append(f"reason: {spec.reason}")
    return out


def _chains(spec: ScalePlanSpec) -> list[str]:
    out = ["chains"]
    rows = [(ARROW.join([ch.source, *ch.hops]), ch.blocks) for ch in spec.chains]
    width = max((len(r) for r, _ in rows), default=0)
    for row, blocks in rows:
        tail = f"   blocks {_ranges(blocks)}" if blocks else ""
        out.append(f"  {row.ljust(width)}{tail}".rstrip())
    return out if rows else [*out, "  (none)"]


def _binomial(spec: ScalePlanSpec) -> list[str]:
    parent: dict[str, str] = {}
    for step in spec.schedule:
        for t in step.transfers:
            parent.setdefault(t.receiver, t.sender)
    children: dict[str, list[str]] = {}
    for child, up in parent.items():
        children.setdefault(up, []).append(child)
    tree: list[str] = []
    for src in spec.sources:
        tree.append(f"  {src.pod}")
        tree += [f"  {line}" for line in _subtree(src.pod, children, "")]
    if len(tree) > MAX_TREE:
        tree = [*tree[:MAX_TREE], f"  ... {len(tree) - MAX_TREE} more"]
    out = ["tree (who first sends to whom)", *tree]
    if spec.block_orders:
        out += ["block orders"]
        out += [f"  {o.source}: {' '.join(map(str, o.order))}" for o in spec.block_orders]
    most = max((len(s.transfers) for s in spec.schedule), default=0)
    out.append(f"steps ({len(spec.schedule)}, at most {most} transfers each)")
    for i, step in enumerate(spec.schedule[:MAX_STEPS], 1):
        moves = "   ".join(f"{t.sender}{ARROW}{t.receiver} #{t.block}" for t in step.transfers)
        out.append(f"  {i:>3}  {moves}")
    if len(spec.schedule) > MAX_STEPS:
        out.append(f"  ... {len(spec.schedule) - MAX_STEPS} more steps")
    return out


def _subtree(node: str, children: dict[str, list[str]], indent: str) -> Iterator[str]:
    kids = children.get(node, [])
    for i, kid in enumerate(kids):
        last = i == len(kids) - 1
        yield f"{indent}{'└' if last else '├'}─▶ {kid}"
        yield from _subtree(kid, children, indent + ("    " if last else "│   "))


def _targets(spec: ScalePlanSpec, status: ScalePlanStatus) -> list[str]:
    got = {t.pod: t for t in status.targets}
    predicted = {p.pod: p.complete_seconds for p in spec.predictions}
    total = len(spec.blocks)
    width = max([len("target"), *(len(t) for t in spec.targets)])
    head = f"  {'target':<{width}}  {'received':<{BAR + 2}}  {'blocks':>7}"
    head += "       predicted  measured"
    out = ["targets", head]
    for pod in spec.targets:
        t = got.get(pod) or TargetProgress(pod=pod)
        n = total if t.complete else min(t.blocks_received, total)
        filled = round(BAR * n / total) if total else 0
        bar = "[" + "█" * filled + "░" * (BAR - filled) + "]"
        state = "✓" if t.complete else f"{100 * n // total if total else 0}%"
        pred = seconds(predicted[pod]) if pod in predicted else "-"
        done = seconds(t.transfer_seconds) if t.transfer_seconds is not None else "-"
        if done == "-" and t.complete and t.first_complete_time and status.start_time:
            seen = (t.first_complete_time - status.start_time).total_seconds()
            done = f"seen at {seconds(seen)}"  # no worker measurement (an older worker)
        count = f"{n}/{total}"
        out.append(f"  {pod:<{width}}  {bar}  {count:>7} {state:>4}  {pred:>9}  {done}")
    return out


def _pipelines(spec: ScalePlanSpec, status: ScalePlanStatus) -> list[str]:
    if not spec.execution_pipelines:
        return []
    out = ["", "execution pipelines (serve while loading)"]
    for i, p in enumerate(spec.execution_pipelines):
        stages = " | ".join(f"{s.pod} L{s.layer_start}-{s.layer_end - 1}" for s in p.stages)
        at = p.ready_seconds
        ready = f"   predicted ready at {seconds(at)}" if at is not None else ""
        out.append(f"  [{stages}]{ready}")
        if i < len(status.pipelines):
            out.append(f"    {_pipeline_state(status.pipelines[i])}")
    return out


def _pipeline_state(p: PipelineStatus) -> str:
    """'Serving: covered at 2.91s, serving at 3.02s (delay 0.11s)' and the like."""
    times = [
        f"{what} at {seconds(at)}"
        for what, at in (("covered", p.covered_seconds), ("serving", p.serving_seconds))
        if at is not None
    ]
    text = f"{p.state}" + (": " + ", ".join(times) if times else "")
    if p.serving_delay_seconds is not None:
        text += f" (delay {seconds(p.serving_delay_seconds)})"
    elif not times and p.state == PipelineState.DISSOLVED:
        text += " (never seen serving)"
    return text


def _ranges(blocks: list[int]) -> str:
    """Block lists as runs: [0, 1, 2, 5] -> '0-2,5' (circular orders keep their order)."""
    runs: list[list[int]] = []
    for b in blocks:
        if runs and b == runs[-1][-1] + 1:
            runs[-1].append(b)
        else:
            runs.append([b])
    return ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
