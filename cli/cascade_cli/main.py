"""The `cascade` console script: one argparse parser, one subcommand group per area.

Each group lives with the code it drives and contributes `add_parser(subparsers)`; its
subcommands set `func(args) -> int`. Groups are imported lazily by name so a broken or
heavy group (torch for `model`) does not slow down or break the others.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from collections.abc import Sequence

# (group, module providing add_parser).
GROUPS: tuple[tuple[str, str], ...] = (
    ("dev", "cascade_dev.cli"),
    ("model", "cascade_cli.model"),
    ("bench", "cascade_cli.bench"),
    ("plan", "cascade_cli.plan"),
    ("top", "cascade_cli.top"),
    ("simulate", "cascade_cli.simulate"),
)


def build_parser(groups: Sequence[tuple[str, str]] = GROUPS) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cascade", description="Cascade: serve and autoscale LLMs on Kubernetes."
    )
    sub = parser.add_subparsers(dest="group", required=True, metavar="GROUP")
    for _name, module in groups:
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as exc:
        print(f"cascade {args.group}: error: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
