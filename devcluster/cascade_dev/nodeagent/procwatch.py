"""Exit notifications for container processes without polling.

One thread waits on a pidfd per process (Linux >= 5.3). Children of this agent are
reaped for their exit code; processes adopted from a previous agent are not our
children, so only the fact that they ended is known.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import threading
from collections.abc import Callable

from .runner import Proc

log = logging.getLogger(__name__)

OnExit = Callable[[int | None], None]


class ExitWatcher:
    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._rd, self._wr = os.pipe()
        os.set_blocking(self._rd, False)
        self._sel.register(self._rd, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        self._pending: list[tuple[int, Proc, OnExit]] = []
        self._thread = threading.Thread(target=self._run, name="exit-watcher", daemon=True)
        self._thread.start()

    def watch(self, proc: Proc, on_exit: OnExit) -> None:
        """Call `on_exit(exit_code)` once `proc` has ended (maybe right away)."""
        try:
            fd = os.pidfd_open(proc.pid)
        except ProcessLookupError:
            threading.Thread(target=lambda: on_exit(proc.exit_code()), daemon=True).start()
            return
        if not proc.alive():  # pid reused or already gone between the check and the open
            os.close(fd)
            threading.Thread(target=lambda: on_exit(proc.exit_code()), daemon=True).start()
            return
        with self._lock:
            self._pending.append((fd, proc, on_exit))
        os.write(self._wr, b"x")

    def _run(self) -> None:
        while True:
            for key, _ in self._sel.select():
                if key.data is None:
                    with contextlib.suppress(BlockingIOError):
                        os.read(self._rd, 4096)
                    with self._lock:
                        pending, self._pending = self._pending, []
                    for fd, proc, cb in pending:
                        self._sel.register(fd, selectors.EVENT_READ, (proc, cb))
                    continue
                proc, cb = key.data
                self._sel.unregister(key.fd)
                os.close(key.fd)
                try:
                    cb(proc.exit_code())
                except Exception:
                    log.exception("exit callback for pid %d failed", proc.pid)
