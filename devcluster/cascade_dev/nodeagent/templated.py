"""The node agent's side of the warm worker template (cascade_dev.template).

`WorkerTemplate` starts the template process with one end of a socket pair, sends it a
`Spawn` per worker container and turns the answer into a `runner.Proc` whose exit code
comes from the template's `Exited` report (the child is the template's, not ours). When
the template is down, `serves` says no and the agent execs the container as usual; a
dead template is started again at the next container start, at most once a minute.
`CASCADE_DEV_WORKER_TEMPLATE=0` in the agent's environment turns it off.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from cascade_dev.template.messages import (
    Exited,
    MountSpec,
    Spawn,
    Spawned,
    UserSpec,
    decode,
    encode,
)

from .identity import Identity
from .runner import ExitWaiter, Mount, Proc, start_ticks, write_log_header

log = logging.getLogger(__name__)

WORKER_SCRIPT = "cascade-worker"
WORKER_WARM = "cascade_worker.main:warm_imports"
ENV_SWITCH = "CASCADE_DEV_WORKER_TEMPLATE"
SPAWN_TIMEOUT_S = 120.0  # the first spawn waits for the template's own imports
EXIT_REPORT_S = 10.0  # how long a dead child's exit code may take to arrive
RESTART_AFTER_S = 60.0

T = TypeVar("T")


def enabled(environ: Mapping[str, str]) -> bool:
    return environ.get(ENV_SWITCH, "1") not in ("0", "false", "no", "off")


class WorkerTemplate:
    def __init__(
        self,
        log_path: Path,
        tag: str,
        scripts: Sequence[str] = (WORKER_SCRIPT,),
        warm: Sequence[str] = (WORKER_WARM,),
    ) -> None:
        self.log_path, self.tag = log_path, tag
        self.scripts, self.warm = tuple(scripts), tuple(warm)
        self._lock = threading.Condition()
        self._sock: socket.socket | None = None
        self._next_id = 0
        self._replies: dict[int, Spawned] = {}
        self._exits: dict[int, int] = {}
        self._started_at = -RESTART_AFTER_S

    def start(self) -> None:
        """Start the template (its imports run in the background of the agent)."""
        with self._lock:
            self._started_at = time.monotonic()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = [sys.executable, "-m", "cascade_dev.template", "--fd", str(theirs.fileno())]
        argv += [a for s in self.scripts for a in ("--script", s)]
        argv += [a for w in self.warm for a in ("--warm", w)]
        argv += ["--tag", self.tag]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            )
        theirs.close()
        with self._lock:
            self._sock = ours
        args = (ours, proc)
        threading.Thread(target=self._read, args=args, name="template", daemon=True).start()
        log.info("worker template started (pid %d, log %s)", proc.pid, self.log_path)

    def serves(self, program: str) -> bool:
        """True when `program` (argv[0]) can be forked from a live template."""
        if os.path.basename(program) not in self.scripts:
            return False
        with self._lock:
            if self._sock is not None:
                return True
            now = time.monotonic()
            if now - self._started_at < RESTART_AFTER_S:
                return False
            self._started_at = now  # this caller restarts it, no other one
        self.start()
        return True

    def launch(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        cwd: Path,
        log_path: Path,
        pid_path: Path,
        *,
        netns: str | None,
        mounts: Sequence[Mount],
        user: Identity | None = None,
    ) -> Proc:
        """Fork the container from the template, as `user` (one that keeps no
        capability: Identity.forkable); OSError when the template cannot."""
        with self._lock:
            sock, self._next_id = self._sock, self._next_id + 1
            req_id = self._next_id
        if sock is None:
            raise OSError("the worker template is not running")
        spawn = Spawn(
            req_id,
            list(argv),
            dict(env),
            str(cwd),
            netns,
            [MountSpec(m.source, m.target, m.read_only) for m in mounts],
            UserSpec(user.uid, user.gid, list(user.groups), user.no_new_privs) if user else None,
        )
        with open(log_path, "ab") as log_file:
            write_log_header(log_file, argv, via="worker template")
            socket.send_fds(sock, [encode(spawn)], [log_file.fileno()])
        reply = self._await(lambda: self._replies.pop(req_id, None), SPAWN_TIMEOUT_S)
        if reply is None or reply.pid is None:
            why = reply.error if reply else f"no answer in {SPAWN_TIMEOUT_S:.0f} s"
            raise OSError(f"worker template: {why}")
        pid_path.write_text(f"{reply.pid}\n")
        return Proc(reply.pid, start_ticks(reply.pid) or 0, waiter=self._exit_code(reply.pid))

    def _exit_code(self, pid: int) -> ExitWaiter:
        return lambda: self._await(lambda: self._exits.pop(pid, None), EXIT_REPORT_S)

    def _await(self, take: Callable[[], T | None], timeout: float) -> T | None:
        deadline = time.monotonic() + timeout
        with self._lock:
            while (got := take()) is None and self._sock is not None:
                left = deadline - time.monotonic()
                if left <= 0 or not self._lock.wait(left):
                    return take()
            return got

    def _read(self, sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
        """Demultiplex replies and exit reports until the template closes its end (then
        reap it)."""
        while True:
            try:
                data = sock.recv(1 << 16)
                msg = decode(data) if data else None
            except (OSError, ValueError) as e:
                log.error("worker template: %s", e)
                msg = None
            with self._lock:
                if isinstance(msg, Spawned):
                    self._replies[msg.id] = msg
                elif isinstance(msg, Exited):
                    self._exits[msg.pid] = msg.exit_code
                elif msg is None:
                    self._sock = None
                self._lock.notify_all()
            if msg is None:
                sock.close()
                code = proc.wait()
                log.warning(
                    "worker template exited (%s); workers start by exec until it is back", code
                )
                return
