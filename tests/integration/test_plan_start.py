"""Issue 15, acceptance 4: a plan's first bytes are on the wire within 1 s of the first
target pod answering (on a slower machine: within a bound measured in the same run).

A one-replica ModelDeployment serves; `kubectl scale` takes it to 6. There is no gather
wait: the operator plans for the first new pod whose control API answers (a probe
watches starting pods every 0.2 s) and dispatches the plan in the same reconcile; pods
that answer later get a follow-up plan or wait for the running one, whichever the planner
predicts faster. Each ScalePlan's status records when its first target answered
(`targetAnsweredTime`, the worker's own clock) and when its first bytes landed at a
target (`firstByteTime`, the receiving worker's clock), and the seconds between them
(`startDelaySeconds`); every plan's is printed.

The bound. 1 s is what the first plan's delay stays under on the machine the figure was
measured on (0.38-0.60 s in five runs, docs/dataplane.md), but the delay is CPU work
(the operator's reconcile and orders, the new worker's first connection to the leader,
with five workers starting on the same cores): a fresh machine measured 1.232 s, and on
a machine half as fast it would be about twice the figure. So the test measures, in the
same run, how long the cluster took to bring the first target up to answering: from
`kubectl scale` to its `targetAnsweredTime` (the API write, the operator's reconcile
creating five pods, the scheduler, the node agent starting the worker, the worker
listening: the same kinds of work on the same cores a moment before, so the two grow
together on a slower machine; both times are this host's wall clock). That proxy misses
one slowdown: with half the cores (hack/halved-cpu.sh) the first target still answered
in under 0.7 s, before the five workers' heavy start-up competes for the core, and the
delay measured 1.002 s. So the fixed part of the bound also scales with the cores this
run has (its affinity and CPU quota, read here) against the two cores of the machine the
figure was stated for, never below the stated 1 s. The first plan's delay must be at
most the larger of that and ANSWER_FACTOR times the answer time: on a machine like the
reference the acceptance figure holds as it was stated, on a slower one the bound grows
with what the same run measured. The test prints the figures and their ratio. The rest
is correctness, whatever the speed: every completed plan recorded both times and their
gap, the first plan completed, and no target was in two plans. A first plan over its
bound is tried once more on a fresh deployment (CI runs the unit tier on the same cores
beside this test, and a burst of it lands in the delay); a design that starts late misses
both tries.

Needs 6 nodes (one instance each): marked `nodes(6)`, so the session's cluster has them.
"""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from typing import Any

import pytest
from integration_helpers import Namespace

from cascade_dev.testing import wait_for

MD = "planstart"
NEEDED_NODES = 6
# A chain starts with its first ready target instead of the slowest pod of the plan
# (1.052 s in a CI run where one plan took all five targets); 0.38-0.60 s in five runs since.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.nodes(NEEDED_NODES)]

BOUND_S = 1.0  # the acceptance figure, on a machine as fast as the one it was measured on
REFERENCE_CORES = 2  # that machine's
ANSWER_FACTOR = 1.5  # times the same run's kubectl scale -> first target answering


def cores_here() -> float:
    """The cores this process (and the cluster it started) may use: its CPU affinity,
    within its cgroup's CPU quota if tighter."""
    from cascade_worker.engine.cpu_limit import own_quota_cores

    quota = own_quota_cores()
    affinity = len(os.sched_getaffinity(0))
    return min(affinity, quota) if quota is not None else affinity


def start_bound(answer_s: float, cores: float) -> float:
    """The first plan's start delay bound, given how long the first target took to answer
    and the cores the run had."""
    fixed = BOUND_S * max(1.0, REFERENCE_CORES / cores)
    return max(fixed, ANSWER_FACTOR * answer_s)


def plans(ns: Namespace, md: str) -> list[dict[str, Any]]:
    """`md`'s, in the order they were made: creation times have whole seconds, so plans
    made in the same second go by when their first target answered (a follow-up plan's
    later)."""
    items = json.loads(ns.kubectl("get", "sp", "-o", "json"))["items"]
    return sorted(
        (p for p in items if p["spec"]["deployment"] == md),
        key=lambda p: (
            p["metadata"]["creationTimestamp"],
            status(p).get("targetAnsweredTime") or "",
            p["metadata"]["name"],
        ),
    )


def status(plan: dict[str, Any]) -> dict[str, Any]:
    return dict(plan.get("status") or {})


def covered(ns: Namespace, md: str) -> set[str]:
    """Targets of `md`'s Completed plans."""
    done = [p for p in plans(ns, md) if status(p).get("phase") == "Completed"]
    return {t for p in done for t in p["spec"]["targets"]}


def settled(ns: Namespace, md: str) -> bool:
    return all(status(p).get("phase") not in (None, "Pending", "Running") for p in plans(ns, md))


def when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def first_plan_start(ns: Namespace, md: str) -> tuple[float, float, dict[str, Any]]:
    """Scale `md` 1 -> 6, check every plan's record; (the first plan's start delay, its
    bound, its status)."""
    ns.serve_model(md, 1)
    began, scaled_at = time.monotonic(), time.time()
    ns.kubectl("scale", f"md/{md}", "--replicas=6")
    targets = {f"{md}-{i}" for i in range(1, 6)}
    wait_for("5 targets hold the model", lambda: covered(ns, md) >= targets, timeout=300)
    wait_for("every plan ended", lambda: settled(ns, md), timeout=120)
    ns.wait_ready(md, 6, 120)
    print(f"scale 1 -> 6: all Ready {time.monotonic() - began:.1f} s after kubectl scale")
    print(ns.kubectl("get", "sp"))
    found = plans(ns, md)
    for p in found:
        st = status(p)
        print(
            f"{p['metadata']['name']}: {st.get('phase')} targets={','.join(p['spec']['targets'])}"
            f" sources={','.join(s['pod'] for s in p['spec']['sources'])}"
            f" targetAnsweredTime={st.get('targetAnsweredTime')}"
            f" firstByteTime={st.get('firstByteTime')}"
            f" startDelaySeconds={st.get('startDelaySeconds')}"
            f" predicted={p['spec'].get('predictedCompletionSeconds')}"
            f" measured={st.get('measuredCompletionSeconds')}"
        )
    completed = [p for p in found if status(p).get("phase") == "Completed"]
    for p in completed:  # every completed plan recorded both times, and their gap
        st = status(p)
        answered, first = when(st.get("targetAnsweredTime")), when(st.get("firstByteTime"))
        assert answered is not None and first is not None, st
        gap = (first - answered).total_seconds()
        assert st["startDelaySeconds"] == pytest.approx(gap, abs=2e-3)
    # No target received along two completed plans.
    named = [t for p in completed for t in p["spec"]["targets"]]
    assert len(named) == len(set(named)), named
    first_plan = found[0]
    st = status(first_plan)
    assert st.get("phase") == "Completed", st
    delay, answered = st.get("startDelaySeconds"), when(st.get("targetAnsweredTime"))
    assert delay is not None and answered is not None, st
    answer_s = answered.timestamp() - scaled_at
    assert answer_s > 0, f"the first target answered {-answer_s:.3f} s before kubectl scale"
    cores = cores_here()
    bound = start_bound(answer_s, cores)
    print(
        f"first plan {first_plan['metadata']['name']}: start delay {delay} s; its first target "
        f"answered {answer_s:.3f} s after kubectl scale (delay / answer "
        f"{delay / answer_s:.2f}); bound {bound:.3f} s = max({BOUND_S} s x "
        f"max(1, {REFERENCE_CORES} / {cores:g} cores), {ANSWER_FACTOR} x {answer_s:.3f} s)"
    )
    return delay, bound, st


def test_the_first_plan_starts_soon_after_its_first_target_answers(
    cluster: Namespace,
) -> None:
    delay, bound, st = first_plan_start(cluster, MD)
    if delay > bound:
        # Once more on a fresh deployment: the delay is CPU work on shared cores, and CI
        # runs the unit tier beside this test; a design that starts late misses twice.
        cluster.kubectl("delete", "md", MD, "--wait=true")
        gone = lambda: not cluster.worker_pods(MD) and not cluster.host_copies(MD)  # noqa: E731
        wait_for("the first try's pods gone", gone, timeout=120)
        first = f"first try {delay} s > {bound:.3f} s; "
        delay, bound, st = first_plan_start(cluster, f"{MD}-again")
        assert delay <= bound, first + f"second {delay} s > {bound:.3f} s: {st}"
