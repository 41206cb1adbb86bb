"""Tests marked `ucx` run UCX inside the test process; each runs in a fresh interpreter.
Under pytest-xdist every cluster test goes to one worker (`pytest_xdist_make_scheduler`).

ucxx keeps one process-wide context with a C++ progress thread. Sharing it across
hundreds of tests, event loops and deliberately killed endpoints is nothing a worker
does (one worker = one process), and a crash there would take the whole session down.
So each such test runs as `python -m pytest <nodeid>` in a child, in a session (process
group) of its own that is killed whole on timeout, and the child's own setup, call and
teardown reports (skips, xfails, errors) are replayed here as if it had run in this
process.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from _pytest.reports import TestReport
from process_group import run_in_group

IN_CHILD = "CASCADE_TEST_ISOLATED"
REPORTS = "CASCADE_TEST_REPORTS"  # where a child writes its reports (JSON lines)
GRACE_S = 60  # start-up and teardown on top of the test's own timeout
_CONFIG: pytest.Config | None = None  # this session's config (a child serializes with it)


def _timeout(item: pytest.Item) -> float:
    marker = item.get_closest_marker("timeout")
    base = float(marker.args[0]) if marker and marker.args else 600.0
    return base + GRACE_S


def _report(item: pytest.Item, when: str, outcome: str, longrepr: object) -> TestReport:
    return TestReport(
        item.nodeid,
        item.location,
        {name: 1 for name in item.keywords},
        outcome,  # type: ignore[arg-type]
        longrepr,  # type: ignore[arg-type]
        when,  # type: ignore[arg-type]
    )


def _child_reports(item: pytest.Item, path: Path) -> dict[str, TestReport]:
    """The child's own reports of this test, by phase (setup, call, teardown)."""
    if not path.exists():
        return {}
    hook = item.config.hook
    reports = [
        hook.pytest_report_from_serializable(config=item.config, data=json.loads(line))
        for line in path.read_text().splitlines()
    ]
    for report in reports:
        if isinstance(report.longrepr, list):  # a skip's (path, line, reason) came as a list
            report.longrepr = tuple(report.longrepr)
    return {r.when: r for r in reports if isinstance(r, TestReport) and r.nodeid == item.nodeid}


def _run_isolated(item: pytest.Item) -> list[TestReport]:
    """The child's setup, call and teardown reports as it made them (skips, xfails and
    errors included); a phase it never reported (timeout, crash) is a failure here."""
    cmd = [sys.executable, "-m", "pytest", item.nodeid, "-q", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reports.jsonl"
        env = os.environ | {IN_CHILD: "1", REPORTS: str(path)}
        rc, output = run_in_group(cmd, cwd=item.config.rootpath, env=env, timeout=_timeout(item))
        reports = _child_reports(item, path)
    if rc is None:
        why = f"isolated test timed out after {_timeout(item):.0f} s (its process group killed)"
    elif rc < 0:
        why = f"isolated test process died from signal {-rc}"
    else:
        why = f"isolated test ended (pytest exit code {rc}) without reporting this phase"
    failure = f"{why}\n\n{output[-20000:]}"
    setup = reports.get("setup") or _report(item, "setup", "failed", failure)
    out = [setup]
    if setup.passed:  # a skipped or failed setup runs no call
        out.append(reports.get("call") or _report(item, "call", "failed", failure))
    reported = any(r.failed for r in out)  # then a missing teardown is the same failure
    teardown = (
        _report(item, "teardown", "passed", None)
        if reported
        else (_report(item, "teardown", "failed", failure))
    )
    return [*out, reports.get("teardown") or teardown]


def pytest_configure(config: pytest.Config) -> None:
    global _CONFIG
    _CONFIG = config


def pytest_runtest_logreport(report: TestReport) -> None:
    """In a child: write each report for the parent (serialized as pytest-xdist does)."""
    path = os.environ.get(REPORTS)
    if path and os.environ.get(IN_CHILD) and _CONFIG is not None:
        data = _CONFIG.hook.pytest_report_to_serializable(config=_CONFIG, report=report)
        with open(path, "a") as f:
            f.write(json.dumps(data) + "\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if item.get_closest_marker("ucx") is None or os.environ.get(IN_CHILD):
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in _run_isolated(item):
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


CLUSTER_TESTS = "tests/integration/"  # one dev cluster: run in order, on one worker


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`make test` runs two pytest-xdist workers: one takes every cluster test, in
    collection order (the lifecycle tests first, then the session's one cluster), the
    other the unit and helm tiers beside it. xdist's own `xdist_group` mark cannot do
    this under pytest 9 (it rewrites `item._nodeid`, which pytest 9 no longer reads), so
    the scheduler groups by path: a scope of xdist's LoadScopeScheduling is one unit of
    work on one worker; every cluster test shares one scope, every other test is its own."""
    from xdist.scheduler import LoadScopeScheduling

    class ClusterScope(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return CLUSTER_TESTS if nodeid.startswith(CLUSTER_TESTS) else nodeid

    return ClusterScope(config, log)
