"""The warm worker template: containers forked from a pre-imported process, with their
own log, environment, working dir, session and exit code (real processes, no netns)."""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from ports import free_port

from cascade_dev.nodeagent.runner import LOG_HEADER, Proc
from cascade_dev.nodeagent.templated import WorkerTemplate
from cascade_dev.template.messages import Exited, MountSpec, Spawn, Spawned, decode, encode


@pytest.fixture
def template(tmp_path: Path) -> Iterator[WorkerTemplate]:
    # The light CLI and the real worker script; no warm-up (the worker's imports are slow).
    t = WorkerTemplate(
        tmp_path / "template.log", str(tmp_path), scripts=["cascade", "cascade-worker"], warm=[]
    )
    t.start()
    yield t
    if t._sock is not None:
        t._sock.close()  # the template exits when the agent's end closes


def _launch(t: WorkerTemplate, tmp: Path, argv: list[str], **env: str) -> Proc:
    pod = tmp / "pod"
    pod.mkdir(exist_ok=True)
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp)}
    return t.launch(argv, base | env, pod, pod / "c.log", pod / "c.pid", netns=None, mounts=[])


def test_child_runs_the_script_with_its_argv_and_log(template, tmp_path):
    proc = _launch(template, tmp_path, ["/venv/bin/cascade", "--help"])
    assert proc.exit_code() == 0
    log = (tmp_path / "pod" / "c.log").read_bytes()
    assert log.startswith(LOG_HEADER) and b"worker template" in log
    assert b"usage: cascade" in log
    assert (tmp_path / "pod" / "c.pid").read_text().strip() == str(proc.pid)


def test_exit_code_of_a_failing_script(template, tmp_path):
    assert _launch(template, tmp_path, ["cascade", "no-such-command"]).exit_code() == 2


def test_worker_serves_in_its_cwd_and_env_then_dies_by_signal(template, tmp_path):
    port = free_port()
    proc = _launch(
        template,
        tmp_path,
        ["/venv/bin/cascade-worker"],
        POD_IP="127.0.0.1",
        POD_NAME="templated-0",
        CASCADE_WORKER_PORT=str(port),
    )
    deadline, body = time.monotonic() + 60, b""
    while time.monotonic() < deadline and not body:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/status", timeout=2) as r:
                body = r.read()
        except OSError:
            assert proc.alive(), (tmp_path / "pod" / "c.log").read_text()
            time.sleep(0.1)
    assert b"templated-0" in body
    assert os.getsid(proc.pid) == proc.pid  # its own session: the agent signals the group
    assert os.readlink(f"/proc/{proc.pid}/cwd") == str(tmp_path / "pod")
    proc.signal(signal.SIGKILL)
    assert proc.exit_code() == 137


def test_unknown_program_is_refused(template, tmp_path):
    assert not template.serves("/usr/bin/true")
    with pytest.raises(OSError, match="does not serve"):
        _launch(template, tmp_path, ["/usr/bin/true"])


def test_messages_round_trip_and_bad_ones_are_named():
    spawn = Spawn(3, ["a", "b"], {"K": "V"}, "/tmp", "cxp-1", [MountSpec("/s", "/t", True)])
    for msg in (spawn, Spawned(3, 42), Spawned(3, None, "no"), Exited(42, 137)):
        assert decode(encode(msg)) == msg
    with pytest.raises(ValueError, match="bad template message"):
        decode(b'{"kind": "nonsense"}')
