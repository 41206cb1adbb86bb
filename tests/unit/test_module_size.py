"""No module of the serving components grows past 300 lines.

The operator, worker, gateway and the shared protocol are read most and changed by
most hands; a module past a few hundred lines has usually stopped saying one thing
(the guide's "avoid 1,000-line modules"). Split by what each part decides or does.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FOLDERS = ("operator", "worker", "gateway", "protocol", "autoscaler", "simulator")
MAX_LINES = 300


def test_serving_modules_stay_small() -> None:
    offenders = []
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                offenders.append(f"  {path.relative_to(REPO)}: {lines} lines")
    assert not offenders, f"modules over {MAX_LINES} lines:\n" + "\n".join(offenders)
