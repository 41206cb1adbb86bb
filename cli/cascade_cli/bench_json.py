"""Every bench's `--json`: the same document its table was printed from."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


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
    png_path: Path | None,
    plot: Callable[[dict[str, Any], Path], object],
) -> int:
    """A cluster bench's ending: the table on stdout, the JSON and the PNG if asked for."""
    print(table(doc))
    write_json(json_path, doc)
    if png_path is not None:
        plot(doc, png_path)
        print(f"wrote {png_path}", file=sys.stderr)
    return 0


def subset(text: str, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    """A comma-separated choice of `allowed` names, in the order given (argparse type)."""
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names or any(n not in allowed for n in names):
        raise argparse.ArgumentTypeError(f"{what} are a subset of {','.join(allowed)}")
    return names
