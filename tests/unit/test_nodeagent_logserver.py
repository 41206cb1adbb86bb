"""Log selection behind `kubectl logs` on simulated nodes."""

from __future__ import annotations

from cascade_dev.nodeagent.logserver import select, split_runs
from cascade_dev.nodeagent.runner import LOG_HEADER

LOG = (
    LOG_HEADER + b"2024-01-01T00:00:00Z: exec /bin/app\n"
    b"first 1\nfirst 2\n" + LOG_HEADER + b"2024-01-01T00:00:10Z: exec /bin/app\n"
    b"second 1\nsecond 2\nsecond 3\n"
)


def test_split_runs() -> None:
    assert split_runs(LOG) == [b"first 1\nfirst 2\n", b"second 1\nsecond 2\nsecond 3\n"]
    assert split_runs(b"no header\n") == [b"no header\n"]
    assert split_runs(b"") == [b""]


def test_select_current_previous_tail() -> None:
    assert select(LOG, previous=False, tail_lines=None) == b"second 1\nsecond 2\nsecond 3\n"
    assert select(LOG, previous=True, tail_lines=None) == b"first 1\nfirst 2\n"
    assert select(LOG, previous=False, tail_lines=2) == b"second 2\nsecond 3\n"
    assert select(LOG, previous=False, tail_lines=0) == b""
    one_run = LOG_HEADER + b"t: exec x\nonly\n"
    assert select(one_run, previous=True, tail_lines=None) is None
