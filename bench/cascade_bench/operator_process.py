"""`bench scaleup --run-operator`'s `cascade-operator`, watching the bench's namespace
when no installed operator does (the other cluster benches make a namespace of their
own with one: cascade_bench.namespace)."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cascade_dev.operator_process import OperatorProcess


@contextmanager
def operator_process(ns: str, start: bool, model: Path | None = None) -> Iterator[None]:
    """A `cascade-operator` watching `ns` for the bench (when `start`), letting pods read
    `model` if given (else its default model roots)."""
    if not start:
        yield
        return
    log = Path(tempfile.gettempdir()) / f"{ns}-operator.log"
    operator = OperatorProcess(None, ns, log, model_roots=str(model) if model else None)
    operator.start()
    print(f"operator log: {log}", file=sys.stderr)
    try:
        yield
    finally:
        operator.stop()
