"""`cascade top` in a real terminal (tmux) while a deployment scales 1 -> 3.

On the local cluster: `cascade top -n NS` runs in a detached 160x40 tmux session; a
ModelDeployment with one instance is applied and scaled to three with the transfer
paced (3 Mbit/s per sender: its plan runs ~20 s). The screen, read with `tmux
capture-pane` every half second, shows the deployment with its gateway answering, then
the scale-up as it happens (a plan in flight with progress bars, or the ready count
climbing), then three ready instances and the finished plan with its measured seconds;
`q` ends the process with status 0. Every distinct frame is printed (`pytest -s`).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable

import pytest
from integration_helpers import BIN, Namespace, complete, model_deployment

from cascade_cli.top import READ_TIMEOUT_S
from cascade_dev.testing import DevCluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(600),
    pytest.mark.nodes(3),
    pytest.mark.skipif(
        shutil.which("tmux") is None, reason="needs tmux (hack/setup.sh installs it)"
    ),
]

MD = "topview"
WIDTH, HEIGHT = 160, 40


class Tmux:
    """One detached session on a server (socket) of the test's own."""

    def __init__(self) -> None:
        self.socket = f"cascade-top-{uuid.uuid4().hex[:6]}"

    def tmux(self, *args: str) -> str:
        cmd = ["tmux", "-L", self.socket, "-f", "/dev/null", "-u", *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=10).stdout

    def start(self, command: str) -> None:
        self.tmux("new-session", "-d", "-s", "top", "-x", str(WIDTH), "-y", str(HEIGHT), command)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "top")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


class Screen:
    """Reads the pane until a condition holds, keeping every distinct frame it saw."""

    def __init__(self, tmux: Tmux) -> None:
        self.tmux, self.began = tmux, time.monotonic()
        self.frames: list[tuple[float, str]] = []

    def read(self) -> str:
        text = self.tmux.screen().rstrip()
        body = text.split("\n", 1)[-1]  # the header's clock changes every frame
        if not self.frames or self.frames[-1][1].split("\n", 1)[-1] != body:
            self.frames.append((time.monotonic() - self.began, text))
        return text

    def wait(self, what: str, check: Callable[[str], bool], timeout: float) -> str:
        deadline, text = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            text = self.read()
            if check(text):
                return text
            time.sleep(0.5)
        self.print()
        last = " | ".join(line.strip() for line in text.splitlines() if line.strip())
        raise AssertionError(
            f"timed out after {timeout:.0f}s waiting for the screen: {what}; it shows: {last}"
        )

    def print(self) -> None:
        for at, text in self.frames:
            print(f"\n----- t={at:5.1f}s {'-' * (WIDTH - 16)}\n{text}")


def row(replicas: int | str, ready: int | str, loading: int | str) -> Callable[[str], bool]:
    """The deployment's row reads SPEC READY LOADING as given (numbers or patterns)."""
    pattern = re.compile(rf"^{MD}\s+{replicas}\s+{ready}\s+{loading}\s", re.MULTILINE)
    return lambda text: bool(pattern.search(text))


def progress_bar(text: str) -> bool:
    """A target's bar under SCALEPLANS IN FLIGHT."""
    _, _, plans = text.partition("SCALEPLANS IN FLIGHT")
    return bool(re.search(r"^  \S+\s+\[[█░]{20}\]", plans.split("RECENT")[0], re.MULTILINE))


def test_top_shows_a_scale_up_as_it_happens_and_quits_on_q(
    cluster: Namespace, dev_cluster: DevCluster
) -> None:
    ns = cluster
    md = model_deployment(MD, 1, multicast={"rateMbit": 3})
    ns.apply(md)
    top = " ".join(
        shlex.quote(x)
        # A stale 80x24 export (as a test runner leaves) must not pin the view: the gateway
        # line, ~130 columns, is looked for below.
        for x in ("env", f"KUBECONFIG={dev_cluster.kubeconfig}", "COLUMNS=80", "LINES=24",
                  str(BIN / "cascade"), "top", "-n", ns.ns, "--interval", "0.5")
    )  # fmt: skip
    tmux = Tmux()
    screen = Screen(tmux)
    tmux.start(f"{top}; echo EXITED rc=$?; sleep 600")
    try:
        screen.wait("the header", lambda t: t.startswith(f"cascade top   namespace {ns.ns}"), 60)
        screen.wait("one instance ready", row(1, 1, 0), 240)
        screen.wait("the gateway's queues", lambda t: "backends 1/1 ready" in t, 120)
        assert complete(dev_cluster.url(f"{ns.ns}/{MD}-gateway"), MD, timeout=60)
        ttft = re.compile(r"interactive queue 0 running 0 ttft p50/p99 [\d.]+m?s/[\d.]+m?s")
        screen.wait("the request's time to first token", lambda t: bool(ttft.search(t)), 30)
        ns.kubectl("scale", "md", MD, "--replicas=3")
        seen_bar = seen_climb = False

        def three_ready(text: str) -> bool:
            nonlocal seen_bar, seen_climb
            seen_bar = seen_bar or progress_bar(text)
            seen_climb = seen_climb or row(3, "[12]", r"\d+")(text)
            return row(3, 3, 0)(text)

        screen.wait("three instances ready", three_ready, 300)
        # Plans start per answering target, so a scale-up may take two plans: wait for
        # every plan finished and all three instances serving alone.
        screen.wait(
            "the plans finished and three instances serving alone",
            lambda t: (
                re.search(r"^RECENT SCALEPLANS\n\S+ \(topview\)  Completed", t, re.M) is not None
                and "SCALEPLANS IN FLIGHT (0)" in t
                and "mixed 3/3" in t
                and "local 3" in t
            ),
            180,
        )
        assert seen_bar or seen_climb, "no frame showed the scale-up under way"
        tmux.tmux("resize-window", "-t", "top", "-x", "60", "-y", "8")
        small = screen.wait("the frame redrawn for 60x8", lambda t: "more lines" in t, 15)
        assert all(len(line) <= 60 for line in small.splitlines()), small
        tmux.tmux("send-keys", "-t", "top", "q")
        # The terminal is restored at once; the process ends once a read under way ends
        # (top.READ_TIMEOUT_S at most).
        screen.wait("the process gone", lambda t: "EXITED rc=0" in t, READ_TIMEOUT_S + 10)
        screen.print()
        print(
            f"\nplan in flight with progress bars seen: {seen_bar}; ready 1 -> 3 seen: {seen_climb}"
        )
    finally:
        tmux.close()
