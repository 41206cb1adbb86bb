"""The pod worker's state machine against a fake API and fabric, with real processes.

Processes are local shells (no network, no cluster); back-off timers are skipped by
clearing `retry_at` instead of waiting.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from cascade_dev.fabric import PodNet
from cascade_dev.nodeagent.context import AgentContext, HostEnv
from cascade_dev.nodeagent.pods import PodWorker
from cascade_dev.nodeagent.procwatch import ExitWatcher
from cascade_dev.nodeagent.workqueue import WorkQueue
from cascade_dev.testing import wait_for

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="needs /bin/sh")


class FakeKube:
    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str, str]] = []

    def get(self, path: str) -> dict[str, Any] | None:
        return None

    def create_token(self, namespace: str, sa: str, audience: str | None, seconds: int) -> str:
        return "tok"

    def patch_pod_status(self, ns: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(status)
        return {}

    def delete_pod_now(self, ns: str, name: str, uid: str) -> None:
        self.deleted.append((ns, name, uid))


class FakeFabric:
    host_ip = "127.0.0.1"
    mode = "loopback"

    def __init__(self) -> None:
        self.attached: set[str] = set()

    def node_ip(self, node: str) -> str:
        return "127.0.0.1"

    def attach_pod(self, node: str, uid: str) -> PodNet:
        self.attached.add(uid)
        return PodNet("127.0.0.1", None)

    def detach_pod(self, uid: str) -> None:
        self.attached.discard(uid)

    def exec_prefix(self, net: PodNet) -> list[str]:
        return []


class FakeEvents:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def emit(self, pod: Any, node: str, reason: str, message: str, **kw: Any) -> None:
        self.reasons.append(reason)


@pytest.fixture()
def ctx(tmp_path: Path) -> Iterator[AgentContext]:
    bin_dir = os.path.dirname(shutil.which("sh") or "/bin/sh")
    host = HostEnv(
        bin_dir=bin_dir,
        path=os.environ.get("PATH", "/usr/bin:/bin"),
        home=str(tmp_path),
        can_mount=False,
        api_server="https://127.0.0.1:6443",
    )
    c = AgentContext(
        cast(Any, FakeKube()),
        cast(Any, FakeFabric()),
        cast(Any, FakeEvents()),
        ExitWatcher(),
        WorkQueue(),
        tmp_path / "pods",
        tmp_path / "logs",
        host,
    )
    yield c
    c.queue.shutdown()


def make_pod(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    policy: str = "Always",
    uid: str = "uid-1",
) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": uid},
        "spec": {
            "nodeName": "cascade-node-0",
            "restartPolicy": policy,
            "terminationGracePeriodSeconds": 2,
            "containers": containers,
            "initContainers": init or [],
        },
        "status": {},
    }


def sh(name: str, script: str) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "command": ["sh", "-c", script]}


def wait_exit(w: PodWorker, timeout: float = 5.0) -> None:
    wait_for("an exit reported", lambda: bool(w._exits), timeout, every=0.02)


def settle(w: PodWorker, pod: dict[str, Any] | None, timeout: float = 5.0) -> None:
    """Sync a terminating pod until it is torn down (SIGTERM is honoured well in time)."""
    end = time.monotonic() + timeout
    while (delay := w.sync(pod)) is not None:
        assert delay <= 30 and time.monotonic() < end
        time.sleep(0.05)


def last(ctx: AgentContext) -> dict[str, Any]:
    patches: list[dict[str, Any]] = cast(Any, ctx.kube).patches
    return patches[-1]


def test_init_then_app_then_graceful_delete(ctx: AgentContext) -> None:
    pod = make_pod(
        [sh("app", "echo $POD_NAME $NODE_NAME; exec sleep 30")], [sh("init", "echo init")]
    )
    w = PodWorker("uid-1", "cascade-node-0", ctx, pod)
    w.sync(pod)
    assert last(ctx)["phase"] == "Pending"
    assert last(ctx)["initContainerStatuses"][0]["state"]["running"] is not None
    wait_exit(w)
    w.sync(pod)
    st = last(ctx)
    assert st["phase"] == "Running"
    assert st["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert st["containerStatuses"][0]["ready"] is True
    app = w.runs["app"].proc
    assert app is not None and app.alive()
    assert (w.dir / "app.pid").read_text().strip() == str(app.pid)
    end = time.monotonic() + 5
    while "p cascade-node-0" not in (w.dir / "app.log").read_text() and time.monotonic() < end:
        time.sleep(0.02)
    deleting = {
        **pod,
        "metadata": {
            **pod["metadata"],
            "deletionTimestamp": "now",
            "deletionGracePeriodSeconds": 2,
        },
    }
    settle(w, deleting)
    assert w.finished and not app.alive()
    assert cast(Any, ctx.kube).deleted == [("ns", "p", "uid-1")]
    assert not w.dir.exists()
    assert (ctx.logs_dir / "ns_p_uid-1" / "app.log").read_text().count("p cascade-node-0") == 1
    reasons = cast(Any, ctx.events).reasons
    assert {"Pulled", "Created", "Started", "Killing"} <= set(reasons)


def test_crash_loop_and_restart(ctx: AgentContext) -> None:
    pod = make_pod([sh("app", "exit 3")])
    w = PodWorker("uid-1", "cascade-node-0", ctx, pod)
    w.sync(pod)
    wait_exit(w)
    delay = w.sync(pod)
    st = last(ctx)["containerStatuses"][0]
    assert st["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert st["lastState"]["terminated"]["exitCode"] == 3
    assert st["restartCount"] == 0 and delay is not None and 9 < delay <= 10
    w.runs["app"].retry_at = 0.0  # skip the back-off
    w.sync(pod)
    assert last(ctx)["containerStatuses"][0]["restartCount"] == 1
    assert last(ctx)["phase"] == "Running"
    wait_exit(w)
    assert w.sync(None) is None  # vanished from the API: torn down, nothing to delete
    assert w.finished and cast(Any, ctx.kube).deleted == []


def test_never_policy_succeeds_and_releases_network(ctx: AgentContext) -> None:
    pod = make_pod([sh("job", "echo ok")], policy="Never")
    w = PodWorker("uid-1", "cascade-node-0", ctx, pod)
    w.sync(pod)
    assert "uid-1" in cast(Any, ctx.fabric).attached
    wait_exit(w)
    w.sync(pod)
    assert last(ctx)["phase"] == "Succeeded"
    assert w.terminal and "uid-1" not in cast(Any, ctx.fabric).attached


def test_unknown_image_waits(ctx: AgentContext) -> None:
    pod = make_pod([{"name": "app", "image": "nginx:1.25"}])
    w = PodWorker("uid-1", "cascade-node-0", ctx, pod)
    assert w.sync(pod) == pytest.approx(20, abs=1)
    st = last(ctx)["containerStatuses"][0]["state"]["waiting"]
    assert st["reason"] == "ErrImagePull" and "cascade-worker" in st["message"]


def test_readopt_then_orphan_teardown(ctx: AgentContext) -> None:
    pod = make_pod([sh("app", "exec sleep 30")])
    w = PodWorker("uid-1", "cascade-node-0", ctx, pod)
    w.sync(pod)
    proc = w.runs["app"].proc
    assert proc is not None
    # A new agent finds the checkpoint and adopts the live process instead of starting one.
    again = PodWorker("uid-1", "cascade-node-0", ctx, {**pod, "status": last(ctx)})
    adopted = again.runs["app"].proc
    assert adopted is not None and adopted.pid == proc.pid and adopted.popen is None
    again.sync({**pod, "status": last(ctx)})
    assert again.runs["app"].proc is adopted
    # A third agent no longer finds the pod in the API: it stops what is left.
    orphan = PodWorker("uid-1", "", ctx, None)
    assert orphan.runs["app"].proc is not None
    settle(orphan, None)
    assert orphan.finished and not proc.alive()
    assert cast(Any, ctx.kube).deleted == []


def test_pods_get_the_clusters_storage_rate_unless_they_set_it(ctx: AgentContext) -> None:
    ctx.storage_mbit = 100
    own = sh("own", 'echo "rate=$CASCADE_STORAGE_MBIT"')
    own["env"] = [{"name": "CASCADE_STORAGE_MBIT", "value": "5"}]
    pod = make_pod([sh("app", 'echo "rate=$CASCADE_STORAGE_MBIT"'), own], policy="Never")
    w = PodWorker("uid-1", "cascade-node-0", ctx, pod)
    w.sync(pod)
    end = time.monotonic() + 5
    while len(w._exits) < 2 and time.monotonic() < end:
        time.sleep(0.02)
    w.sync(pod)
    assert last(ctx)["phase"] == "Succeeded"
    assert "rate=100" in (w.dir / "app.log").read_text()
    assert "rate=5" in (w.dir / "own.log").read_text()


def test_a_ready_flip_by_another_writer_is_put_back(ctx: AgentContext) -> None:
    """The node lifecycle controller marks pods NotReady when their node's lease looks
    stale (every node after an API-server outage); the agent re-posts its own truth."""
    pod = make_pod([sh("app", "exec sleep 30")])
    w = PodWorker("uid-1", "cascade-node-0", ctx, pod)
    w.sync(pod)
    posted = last(ctx)
    ready = next(c for c in posted["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    patches = cast(Any, ctx.kube).patches
    w.sync({**pod, "status": posted})  # the API echoes our own post: nothing to do
    assert len(patches) == 1
    flipped = [
        {**c, "status": "False", "reason": "NodeNotReady"} if c["type"] == "Ready" else c
        for c in posted["conditions"]
    ]
    w.sync({**pod, "status": {**posted, "conditions": flipped}})
    assert len(patches) == 2
    again = next(c for c in last(ctx)["conditions"] if c["type"] == "Ready")
    assert again["status"] == "True"
    settle(w, {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": "now"}})
