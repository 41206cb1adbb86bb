"""What every bench command shares: its list flags' argparse types, its progress lines,
and its ending (the table, and `--json`: the same document the table was printed from)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def ints(text: str) -> tuple[int, ...]:
    """A comma-separated list of whole numbers, e.g. 1,4,16 (argparse type)."""
    return tuple(int(x) for x in text.split(",") if x.strip())


def names(text: str) -> tuple[str, ...]:
    """A comma-separated list of names, blanks dropped (argparse type)."""
    return tuple(x.strip() for x in text.split(",") if x.strip())


def subset(text: str, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    """A comma-separated choice of `allowed` names, in the order given (argparse type)."""
    chosen = names(text)
    if not chosen or any(n not in allowed for n in chosen):
        raise argparse.ArgumentTypeError(f"{what} are a subset of {','.join(allowed)}")
    return chosen


def say(line: str) -> None:
    """A bench's progress line: on stderr, at once (stdout is the table's)."""
    print(line, file=sys.stderr, flush=True)


def write_json(path: Path | None, doc: dict[str, Any]) -> None:
    """Write `doc` to `path` (parents made) and say so; nothing when no path was asked for."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {path}", file=sys.stderr)


def report(
    doc: dict[str, Any],
    table: Callable[[dict[str, Any]], str],
    json_path: Path | None,
    png_path: Path | None = None,
    plot: Callable[[dict[str, Any], Path], object] | None = None,
) -> int:
    """A bench's ending: the table on stdout, the JSON and the PNG (drawn by `plot`) if
    asked for; 0, the exit status."""
    print(table(doc))
    write_json(json_path, doc)
    if png_path is not None and plot is not None:
        plot(doc, png_path)
        print(f"wrote {png_path}", file=sys.stderr)
    return 0
