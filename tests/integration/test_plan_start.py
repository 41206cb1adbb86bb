"""Issue 15, acceptance 4: a plan's first bytes are on the wire within 1 s of the first
target pod answering.

A one-replica ModelDeployment serves; `kubectl scale` takes it to 6. There is no gather
wait: the operator plans for the first new pod whose control API answers (a probe
watches starting pods every 0.2 s) and dispatches the plan in the same reconcile; pods
that answer later get a follow-up plan or wait for the running one, whichever the planner
predicts faster. Each ScalePlan's status records when its first target answered
(`targetAnsweredTime`, the worker's own clock) and when its first bytes landed at a
target (`firstByteTime`, the receiving worker's clock), and the seconds between them
(`startDelaySeconds`). The first plan's must be at most 1 s; every plan's is printed.

Needs 6 nodes (one instance each); a reused cluster with fewer makes it skip.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from integration_helpers import Namespace, namespace_with_operator

from cascade_dev.testing import DevCluster, wait_for

# Back in the default tier (session 19): a chain now starts with its first ready target
# instead of the slowest pod of the plan (1.052 s in a CI run where one plan took all
# five targets); 0.38-0.60 s in five runs since.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MD = "planstart"
NEEDED_NODES = 6
BOUND_S = 1.0


@pytest.fixture
def cluster(dev_cluster: DevCluster, tmp_path: Path) -> Iterator[Namespace]:
    if dev_cluster.nodes < NEEDED_NODES:
        pytest.skip(f"needs {NEEDED_NODES} nodes, has {dev_cluster.nodes}")
    with namespace_with_operator(dev_cluster, "cascade-start", tmp_path) as ns:
        try:
            yield ns
        finally:
            log = tmp_path / "operator.log"
            if log.exists():
                print(log.read_text()[-3000:])


def plans(ns: Namespace) -> list[dict[str, Any]]:
    """In the order they were made: creation times have whole seconds, so plans made in
    the same second go by when their first target answered (a follow-up plan's later)."""
    items = json.loads(ns.kubectl("get", "sp", "-o", "json"))["items"]
    return sorted(
        items,
        key=lambda p: (
            p["metadata"]["creationTimestamp"],
            status(p).get("targetAnsweredTime") or "",
            p["metadata"]["name"],
        ),
    )


def status(plan: dict[str, Any]) -> dict[str, Any]:
    return dict(plan.get("status") or {})


def covered(ns: Namespace) -> set[str]:
    """Targets of Completed plans."""
    done = [p for p in plans(ns) if status(p).get("phase") == "Completed"]
    return {t for p in done for t in p["spec"]["targets"]}


def settled(ns: Namespace) -> bool:
    return all(status(p).get("phase") not in (None, "Pending", "Running") for p in plans(ns))


def when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def test_the_first_plan_starts_within_a_second_of_its_first_target_answering(
    cluster: Namespace,
) -> None:
    ns = cluster
    ns.apply_model(MD, 1)
    wait_for("1 instance Ready", lambda: len(ns.ready_pods(MD)) == 1, timeout=240)
    began = time.monotonic()
    ns.kubectl("scale", f"md/{MD}", "--replicas=6")
    targets = {f"{MD}-{i}" for i in range(1, 6)}
    wait_for("5 targets hold the model", lambda: covered(ns) >= targets, timeout=300)
    wait_for("every plan ended", lambda: settled(ns), timeout=120)
    wait_for("6 instances Ready", lambda: len(ns.ready_pods(MD)) == 6, timeout=120)
    print(f"scale 1 -> 6: all Ready {time.monotonic() - began:.1f} s after kubectl scale")
    print(ns.kubectl("get", "sp"))
    found = plans(ns)
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
    delay = status(first_plan).get("startDelaySeconds")
    print(f"first plan {first_plan['metadata']['name']}: start delay {delay} s (bound {BOUND_S} s)")
    assert status(first_plan).get("phase") == "Completed", status(first_plan)
    assert delay is not None and delay <= BOUND_S, status(first_plan)
