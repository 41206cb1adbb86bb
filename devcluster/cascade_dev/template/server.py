"""The template process: import once, then fork one child per container the agent asks for.

`python -m cascade_dev.template --script cascade-worker --warm cascade_worker.main:warm_imports
--fd N [--tag STATE_DIR]` imports each script's entry point (from the environment's
console_scripts) and runs the warm functions, then serves `Spawn` requests on the
inherited socket `N` until the agent closes it. A child starts its own session (the
agent signals the process group), joins the pod's namespaces, takes the container's
log as stdout/stderr, environment, working dir and argv, and runs the entry point as the
console script would. The template stays single-threaded (apart from what the imports
start) so the fork is safe: it reaps children on SIGCHLD and reports their exit codes.
Children outlive the template: the agent re-adopts them by pid, as it does processes a
previous agent started.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import selectors
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from typing import NoReturn

from . import namespaces
from .messages import Exited, Spawn, Spawned, decode, encode, exit_code

MAX_MESSAGE = 1 << 20
Entry = Callable[[], object]


def load(ref: str) -> Callable[[], object]:
    """`module:function` -> the function (importing the module)."""
    module, _, name = ref.partition(":")
    fn: Callable[[], object] = getattr(importlib.import_module(module), name)
    return fn


def script_entries(scripts: Sequence[str]) -> dict[str, Entry]:
    """Console script name -> its entry point, imported now."""
    found = {ep.name: ep for ep in entry_points(group="console_scripts") if ep.name in scripts}
    missing = sorted(set(scripts) - set(found))
    if missing:
        raise SystemExit(f"template: no console script named {', '.join(missing)}")
    return {name: load(ep.value) for name, ep in found.items()}


def _retune_threads() -> None:
    """torch read OMP_NUM_THREADS when the template imported it; a container's own value
    (its node's quota) must win as it would in a fresh process."""
    torch = sys.modules.get("torch")
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if torch is not None and threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def run_child(req: Spawn, entry: Entry, log_fd: int, close: Sequence[int]) -> NoReturn:
    """In the forked child: become the container, run the script, exit with its code."""
    status = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(null)
        os.close(log_fd)
        namespaces.enter(req.netns, req.mounts)
        os.chdir(req.cwd)
        if req.user is not None:
            namespaces.become(req.user)
        os.environ.clear()
        os.environ.update(req.env)
        _retune_threads()
        sys.argv = list(req.argv)
        status = _exit_status(entry())
    except SystemExit as e:
        status = _exit_status(e.code)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


class Template:
    def __init__(self, sock: socket.socket, entries: dict[str, Entry]) -> None:
        self.sock = sock
        self.entries = entries
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    def serve(self) -> None:
        """Answer requests and report exits until the agent closes its end."""
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        sel.register(self.wake_r, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select():
                if key.fileobj is self.wake_r:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 4096)
                    self.reap()
                elif not self.request():
                    return

    def request(self) -> bool:
        data, fds, _, _ = socket.recv_fds(self.sock, MAX_MESSAGE, 1)
        if not data:
            return False  # the agent is gone
        try:
            reply = self.answer(data, fds)
        finally:
            for fd in fds:
                os.close(fd)
        self.sock.send(encode(reply))
        return True

    def answer(self, data: bytes, fds: Sequence[int]) -> Spawned:
        try:
            req = decode(data)
        except ValueError as e:
            return Spawned(-1, None, str(e))
        if not isinstance(req, Spawn) or len(fds) != 1:
            return Spawned(-1, None, f"expected a spawn with one log descriptor, got {req}")
        try:
            return self.spawn(req, fds[0])
        except OSError as e:
            return Spawned(req.id, None, f"fork failed: {e}")

    def spawn(self, req: Spawn, log_fd: int) -> Spawned:
        name = os.path.basename(req.argv[0]) if req.argv else ""
        entry = self.entries.get(name)
        if entry is None:
            return Spawned(req.id, None, f"the template does not serve {name!r}")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            run_child(req, entry, log_fd, [self.sock.fileno(), self.wake_r, self.wake_w])
        return Spawned(req.id, pid)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.sock.send(encode(Exited(pid, exit_code(status))))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cascade_dev.template")
    parser.add_argument("--fd", type=int, required=True, help="the agent's socket")
    parser.add_argument("--script", action="append", default=[], help="console script served")
    parser.add_argument("--warm", action="append", default=[], help="module:function run once")
    parser.add_argument("--tag", default="", help="names the cluster (for `dev down`)")
    args = parser.parse_args(argv)
    sock = socket.socket(fileno=args.fd)
    entries = script_entries(args.script)
    for ref in args.warm:
        load(ref)()
    Template(sock, entries).serve()
    return 0
