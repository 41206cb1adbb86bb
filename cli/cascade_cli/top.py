"""`cascade top [-n NS | -A] [--interval S] [--once]`: a live terminal view of serving.

What `kubectl get md,sp` cannot show in one place: per ModelDeployment the instances by
role and serving mode, the gateway's queues and TTFT per request class, the autoscaler's
last reason, and the ScalePlans in flight with per-target progress bars and the
planner's predicted seconds beside the workers' measured ones. Three parts:
`top_model` (pure snapshot), `top_render` (pure frame), `top_fetch` (the reads); this
module is the command: one frame to stdout (`--once`, for scripts) or a curses screen
that a background thread keeps fed, so `q` answers at once even while a read waits.
"""

from __future__ import annotations

import argparse
import contextlib
import curses
import dataclasses
import locale
import os
import shutil
import sys
import threading

from cascade_api.base import utcnow
from cascade_cli.top_fetch import API_TIMEOUT_S, GATEWAY_TIMEOUT_S, Reader, load_kube_config
from cascade_cli.top_model import Snapshot
from cascade_cli.top_render import TITLES, render

KEY_POLL_MS = 100  # how often the screen loop looks at keys, resizes and new data
QUIT_KEYS = (ord("q"), ord("Q"))
READ_TIMEOUT_S = 3 * API_TIMEOUT_S + GATEWAY_TIMEOUT_S  # one snapshot: 3 API reads, gateways
ASCII = str.maketrans({"█": "#", "░": ".", "…": "~"})  # for a terminal without UTF-8


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    top = sub.add_parser(
        "top", help="live view: deployments, roles, modes, gateway queues, plans in flight"
    )
    where = top.add_mutually_exclusive_group()
    where.add_argument("-n", "--namespace", help="default: the kubeconfig context's")
    where.add_argument("-A", "--all-namespaces", action="store_true")
    top.add_argument("--interval", type=float, default=1.0, help="seconds between reads")
    top.add_argument("--once", action="store_true", help="print one frame and exit")
    top.set_defaults(func=_top)


def _top(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise ValueError("--interval must be positive")
    context_ns = load_kube_config()
    scope = "" if args.all_namespaces else (args.namespace or context_ns)
    reader = Reader(scope)
    try:
        if args.once:
            width = shutil.get_terminal_size((160, 40)).columns
            print("\n".join(render(reader.snapshot(), width)))
            return 0
        if not sys.stdout.isatty():
            raise ValueError("stdout is not a terminal: use --once")
        locale.setlocale(locale.LC_CTYPE, "")
        # The terminal's own size, not LINES/COLUMNS: ncurses prefers them, and a parent's
        # stale export (a test runner's 80x24) would pin the view to it, resizes too.
        # (`curses.use_env(False)` is no cure: it means terminfo's fixed 80x24.)
        for name in ("LINES", "COLUMNS"):
            os.environ.pop(name, None)
        poller = Poller(reader, args.interval)
        poller.start()
        try:
            return curses.wrapper(_screen, poller, args.interval)
        finally:
            poller.stop()  # after the terminal is restored: `q` clears the screen at once
    finally:
        reader.close()


class Poller(threading.Thread):
    """Reads a snapshot every `interval` seconds; a failed read keeps the last data and
    says why (a live view rides out an API server restart)."""

    def __init__(self, reader: Reader, interval: float) -> None:
        super().__init__(name="top-poller", daemon=True)
        self.reader, self.interval = reader, interval
        self.latest: Snapshot | None = None
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                self.latest = self.reader.snapshot()
            except Exception as err:  # any failure is shown, never fatal
                last = self.latest or Snapshot(taken_at=utcnow(), scope=self.reader.namespace)
                self.latest = dataclasses.replace(last, taken_at=utcnow(), error=str(err))
            self.stopped.wait(self.interval)

    def stop(self) -> None:
        """Ends the reads and waits for one under way (bounded by its timeouts), so the
        process never exits with this thread inside a socket call: a daemon thread that
        is mid-write at interpreter shutdown can abort it instead of a clean exit 0."""
        self.stopped.set()
        self.join(timeout=READ_TIMEOUT_S)


def _screen(scr: curses.window, poller: Poller, interval: float) -> int:
    with contextlib.suppress(curses.error):  # a terminal that cannot hide the cursor
        curses.curs_set(0)
    scr.timeout(KEY_POLL_MS)
    utf8 = "utf" in (locale.getpreferredencoding(False) or "").lower()
    shown: tuple[Snapshot | None, tuple[int, int]] | None = None
    while scr.getch() not in QUIT_KEYS:
        snap, size = poller.latest, scr.getmaxyx()
        if shown == (snap, size):
            continue  # nothing new: no redraw, no flicker
        shown = (snap, size)
        height, width = size
        if snap is None:
            lines = ["cascade top   reading the API server ..."]
        else:
            lines = render(snap, width, height, interval)
        _draw(scr, lines if utf8 else [x.translate(ASCII) for x in lines], height, width)
    return 0


def _draw(scr: curses.window, lines: list[str], height: int, width: int) -> None:
    scr.erase()
    for y, line in enumerate(lines[:height]):
        attr = curses.A_REVERSE if y == 0 else 0
        if line.startswith(TITLES):
            attr = curses.A_BOLD
        # The bottom-right cell raises: curses cannot move the cursor past it.
        with contextlib.suppress(curses.error):
            scr.addstr(y, 0, line[:width], attr)
    scr.refresh()
