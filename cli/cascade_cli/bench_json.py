"""Every bench's `--json`: the same document its table was printed from."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def write_json(path: Path | None, doc: dict[str, Any]) -> None:
    """Write `doc` to `path` (parents made) and say so; nothing when no path was asked for."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nwrote {path}", file=sys.stderr)
