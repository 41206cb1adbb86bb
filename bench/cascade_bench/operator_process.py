"""A `cascade-operator` process of a bench's own, watching the bench's namespace (when
no installed operator does): `bench scaleup --run-operator`, `bench capacity` and
`bench autoscale` each run one."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def operator_process(ns: str, start: bool, model: Path | None = None) -> Iterator[None]:
    """A `cascade-operator` watching `ns` for the bench (when no installed one does),
    letting pods read `model` if given (else its default model roots)."""
    if not start:
        yield
        return
    exe = Path(sys.executable).with_name("cascade-operator")
    log = Path(tempfile.gettempdir()) / f"{ns}-operator.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(exe), "--namespace", ns, "--liveness-port", "0", "--metrics-port", "0"],
            env=dict(os.environ) | ({"CASCADE_MODEL_ROOTS": str(model)} if model else {}),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    print(f"operator log: {log}", file=sys.stderr)
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=15)
