"""`cascade bench coldstart`: scale decision -> first token, stage by stage, from storage,
a host copy or a peer (issue 12's benchmark). Registered by `bench.add_parser`; the
work is in `cascade_bench.coldstart` (imported when it runs)."""

from __future__ import annotations

import argparse
from pathlib import Path

from cascade_cli.bench_json import report, say, subset
from cascade_protocol.cli_args import from_args

MODEL_DIR = Path("/var/lib/cascade/models/coldstart-8x768")


def add(cmds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from cascade_bench.coldstart.modes import CASES, MODES

    ap = cmds.add_parser(
        "coldstart",
        help="scale decision -> first token, stage by stage: storage, host pool, peer",
        description="Per mode (storage: no host copy, the new instance reads the model's "
        "storage; pool: a host copy holds it; peer: a serving instance sends it) and case "
        "(0 -> 1, 1 -> 2), in a fresh namespace each: the scale decision through /scale, "
        "the new pod Ready, its first token, and its start-up stages from "
        "status.instances[].startup; a restoring instance's restore seconds beside the "
        "profile seconds this run's profile Job measured. The pool mode also reads the "
        "resident memory of the host-copy and worker pods (their processes' VmRSS) at "
        "replicas 1, 6 and 0. Prints a table; --out writes the JSON, --plot a PNG of "
        "stacked stages. Uses a running `cascade dev` cluster that fits, or brings one up.",
    )
    ap.add_argument("--model-dir", type=Path, default=MODEL_DIR, help="made if missing")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--modes", type=lambda t: subset(t, MODES, "modes"), default=MODES)
    ap.add_argument("--cases", type=lambda t: subset(t, CASES, "cases"), default=CASES)
    ap.add_argument("--timeout-s", type=float, default=300.0)
    ap.add_argument("--state-dir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None, metavar="OUT.json")
    ap.add_argument("--plot", type=Path, default=None, metavar="OUT.png")
    ap.set_defaults(func=_coldstart)


def _coldstart(args: argparse.Namespace) -> int:
    from cascade_bench.coldstart.plot import plot
    from cascade_bench.coldstart.report import table
    from cascade_bench.coldstart.run import ColdConfig, run

    return report(run(from_args(ColdConfig, args), say), table, args.out, args.plot, plot)
