"""Tests marked `ucx` run UCX inside the test process; each runs in a fresh interpreter.

ucxx keeps one process-wide context with a C++ progress thread. Sharing it across
hundreds of tests, event loops and deliberately killed endpoints is nothing a worker
does (one worker = one process), and a crash there would take the whole session down.
So each such test runs as `python -m pytest <nodeid>` in a child, and its outcome is
reported here as if it had run in this process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest
from _pytest.reports import TestReport

IN_CHILD = "CASCADE_TEST_ISOLATED"
GRACE_S = 60  # start-up and teardown on top of the test's own timeout


def _timeout(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    base = float(marker.args[0]) if marker and marker.args else 600.0
    return base + GRACE_S


def _report(
    item: pytest.Item, when: str, outcome: str, longrepr: object, took: float
) -> TestReport:
    return TestReport(
        item.nodeid,
        item.location,
        {name: 1 for name in item.keywords},
        outcome,  # type: ignore[arg-type]
        longrepr,  # type: ignore[arg-type]
        when,  # type: ignore[arg-type]
        duration=took,
    )


def _run_isolated(item: pytest.Item) -> list[TestReport]:
    cmd = [sys.executable, "-m", "pytest", item.nodeid, "-q", "-p", "no:cacheprovider", "-rs"]
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd,
            cwd=item.config.rootpath,
            env=os.environ | {IN_CHILD: "1"},
            capture_output=True,
            text=True,
            timeout=_timeout(item),
        )
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, output = None, f"{exc.stdout or ''}{exc.stderr or ''}"
    took = time.monotonic() - start
    setup = _report(item, "setup", "passed", None, 0.0)
    teardown = _report(item, "teardown", "passed", None, 0.0)
    if rc == 0 and re.search(r"\b1 skipped\b", output):
        reason = re.search(r"SKIPPED \[\d+\] ([^:]+):(\d+): (.*)", output)
        where = (reason[1], int(reason[2]), reason[3]) if reason else (item.nodeid, 0, "skipped")
        return [_report(item, "setup", "skipped", where, took), teardown]
    if rc == 0:
        return [setup, _report(item, "call", "passed", None, took), teardown]
    if rc is None:
        why = f"isolated test timed out after {_timeout(item):.0f} s"
    elif rc < 0:
        why = f"isolated test process died from signal {-rc}"
    else:
        why = f"isolated test failed (pytest exit code {rc})"
    return [setup, _report(item, "call", "failed", f"{why}\n\n{output[-20000:]}", took), teardown]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if item.get_closest_marker("ucx") is None or os.environ.get(IN_CHILD):
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in _run_isolated(item):
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
