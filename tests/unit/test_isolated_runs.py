"""tests/conftest.py runs `ucx` tests in child interpreters: a timeout kills the child's
whole process group, and the child's own outcomes (skip, xfail, setup error) are what
the parent reports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from process_group import run_in_group

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
SPAWNER = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(grandchild.pid, flush=True)
time.sleep(60)
"""


def gone(pid: int) -> bool:
    """No such process, or a zombie nobody reaped (it runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_a_timeout_kills_the_childs_whole_process_group() -> None:
    start = time.monotonic()
    rc, output = run_in_group(
        [sys.executable, "-c", SPAWNER], cwd=Path.cwd(), env=dict(os.environ), timeout=3
    )
    assert rc is None and time.monotonic() - start < 20  # not the grandchild's 60 s
    grandchild = int(output.split()[0])
    deadline = time.monotonic() + 5
    while not gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(grandchild)


def test_a_finished_child_reports_its_exit_code_and_output() -> None:
    rc, output = run_in_group(
        [sys.executable, "-c", "print('hi'); raise SystemExit(3)"],
        cwd=Path.cwd(), env=dict(os.environ), timeout=30,
    )  # fmt: skip
    assert (rc, output.strip()) == (3, "hi")


ISOLATED_TESTS = """
import pytest

pytestmark = pytest.mark.ucx

@pytest.fixture
def broken():
    raise RuntimeError("setup broke")

def test_passes():
    pass

def test_skips():
    pytest.skip("no accelerator here")

@pytest.mark.xfail(reason="known bug", strict=True)
def test_xfails():
    assert False

def test_setup_errors(broken):
    pass
"""


def test_the_parent_reports_the_childs_own_outcomes(tmp_path: Path) -> None:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    shutil.copy(CONFTEST.with_name("process_group.py"), tmp_path / "process_group.py")
    (tmp_path / "test_isolated.py").write_text(ISOLATED_TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CASCADE_TEST_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-W", "ignore",
         "test_isolated.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    summary = proc.stdout.strip().splitlines()[-1]
    for outcome in ("1 passed", "1 skipped", "1 xfailed", "1 error"):
        assert outcome in summary, proc.stdout
    assert "no accelerator here" in proc.stdout and "setup broke" in proc.stdout
