"""One timed step: start participants, wait until all are ready, release them together,
wait for the receivers, collect their result files.

Everything a step leaves behind (logs, results, the start file) sits in its own folder,
so a failed run can be read afterwards. A step that fails (a participant crashes, a
timeout) yields a `RunSummary` with an error instead of stopping the whole benchmark.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cascade_bench.cpu import CpuTrace, wait_quiet
from cascade_bench.procs import Launch, ParticipantError, Participants, release
from cascade_bench.results import NodeResult, RunSummary, summarize_run

EXIT_GRACE_S = 15.0  # after the last receiver reported, all may take this long to exit
BUSY_WARN = 0.2  # other load on the host above this makes a run's times suspect
_ports = itertools.count(30000)


def fresh_port() -> int:
    """A listening port no earlier step of this run used: a restarted listener on the same
    port can fail with EADDRINUSE while the last run's connections sit in TIME_WAIT."""
    return next(_ports)


@dataclass(frozen=True)
class StepDir:
    root: Path

    def make(self) -> StepDir:
        for sub in ("ready", "results", "logs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        return self

    @property
    def start(self) -> Path:
        return self.root / "start"

    def ready(self, name: str) -> Path:
        return self.root / "ready" / name

    def result(self, name: str) -> Path:
        return self.root / "results" / f"{name}.json"

    def log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}.log"


def read_results(step: StepDir, names: Sequence[str]) -> list[NodeResult]:
    out = []
    for name in names:
        path = step.result(name)
        if path.exists():
            out.append(NodeResult.from_json(json.loads(path.read_text())))
    return out


def judge(
    step: StepDir, codes: Mapping[str, int | None], receivers: Sequence[str]
) -> tuple[str | None, list[str]]:
    """(error, lingering): an error exit, or a receiver with neither exit nor result, is an
    error; a participant still running after its result is merely lingering (killed)."""
    problems, lingering = [], []
    for name, code in codes.items():
        if code is None and (name not in receivers or step.result(name).exists()):
            lingering.append(name)
        elif code != 0:
            state = "still running" if code is None else f"exit {code}"
            problems.append(f"{name}: {state}; log {step.log(name)}")
    return ("; ".join(problems) if problems else None), lingering


def run_step(
    step: StepDir,
    launches: Sequence[Launch],
    receivers: Sequence[str],
    nblocks: int,
    ready_timeout: float,
    run_timeout: float,
    quiet_wait_s: float = 0.0,
) -> RunSummary:
    """Run one method once; times in the results are relative to the common start."""
    error: str | None = None
    lingering: list[str] = []
    trace = CpuTrace()
    background = wait_quiet(BUSY_WARN, quiet_wait_s)
    if background > BUSY_WARN:
        print(
            f"bench: warning: host {background:.0%} busy before {step.root.name}", file=sys.stderr
        )
    with Participants() as ps:

        def poll() -> None:
            trace.sample(ps.pids(), time.time())

        try:
            ps.start_all(launches)
            ps.wait_ready(ready_timeout)
            release(step.start)
            ps.wait_all(run_timeout, receivers, True, poll, lambda n: step.result(n).exists())
            codes = ps.wait_all(EXIT_GRACE_S, on_poll=poll)  # everyone, on their own
            error, lingering = judge(step, codes, receivers)
        except ParticipantError as exc:
            error = str(exc)
    if error:
        print(f"bench: {step.root.name}: {error}", file=sys.stderr, flush=True)
    results = read_results(step, [la.name for la in launches])
    run = replace(summarize_run(results, receivers, nblocks, error), lingering=lingering)
    starts = [r.start_wall for r in results if r.start_wall]
    if starts:
        t0 = min(starts)
        cpu = trace.between(t0, t0 + run.completion_s if run.completion_s else time.time())
        run = replace(run, cpu={**cpu, "background_busy": round(background, 4)})
    return run
