"""The agent: wires the heartbeat, the pod watch, the work queue and the pod workers.

Start-up order matters for re-adoption: nodes are registered, then one list of our
pods fills the cache, then a worker is made for every pod directory a previous agent
left behind (re-adopting live processes, or tearing down pods the API no longer has)
before any worker thread runs, so no pod is ever started twice. On SIGTERM the agent
just stops; pods keep running, as they do when kubelet restarts.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

from cascade_dev.cgroups import CpuCgroups
from cascade_dev.fabric import Fabric
from cascade_dev.topology import MODE_NETNS

from .context import AgentContext, HostEnv
from .cpu import NodeCpu
from .env import API_PORT
from .events import EventRecorder
from .heartbeat import Heartbeat
from .kube import Kube
from .logserver import LogServer
from .nodes import NodeSpec, load_nodes
from .pods import RETRY_S, PodWorker
from .policies import LocalPod, PolicySync
from .procwatch import ExitWatcher
from .templated import WorkerTemplate, enabled
from .watcher import PodWatcher
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

WORKERS = 4


class Agent:
    def __init__(self, state_dir: Path, kubeconfig: Path, fabric: Fabric) -> None:
        cluster = json.loads((state_dir / "cluster.json").read_text())
        self.nodes: list[NodeSpec] = load_nodes(cluster)
        self.node_names = {n.name for n in self.nodes}
        self.kube = Kube(kubeconfig)
        self.state_dir = state_dir
        self.stop = threading.Event()
        self.queue = WorkQueue()
        bin_dir = os.path.dirname(sys.executable)
        host = HostEnv(
            bin_dir=bin_dir,
            path=os.pathsep.join(
                [bin_dir, os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin"]
            ),
            home=os.environ.get("HOME") or "/root",
            can_mount=os.geteuid() == 0,
            api_server=f"https://{fabric.host_ip}:{API_PORT}",
        )
        self.ctx = AgentContext(
            self.kube,
            fabric,
            EventRecorder(self.kube),
            ExitWatcher(),
            self.queue,
            state_dir / "pods",
            state_dir / "logs" / "pods",
            host,
            NodeCpu({n.name: n.cpu for n in self.nodes}, CpuCgroups.detect()),
            WorkerTemplate(state_dir / "logs" / "worker-template.log", str(state_dir))
            if enabled(os.environ)
            else None,
            cluster.get("storage_mbit"),  # absent from cluster.json files before it
        )
        if fabric.mode == MODE_NETNS and host.can_mount:
            trusted = [fabric.host_ip, *(fabric.node_ip(n.name) for n in self.nodes)]
            self.ctx.policies = PolicySync(self.kube, self._local_pods, trusted, self.stop)
        silence = state_dir / "nodeagent" / "silence"
        self.heartbeat = Heartbeat(self.kube, self.nodes, fabric, self.stop, silence)
        self.watcher = PodWatcher(
            self.kube, self.node_names, self._on_pod, self._on_list, self.stop
        )
        self._lock = threading.Lock()
        self._cache: dict[str, dict[str, Any]] = {}
        self._workers: dict[str, PodWorker] = {}
        # Torn down and deleted, but the watch has not said DELETED yet: leave alone.
        self._done: set[str] = set()
        if not host.can_mount:
            log.warning(
                "not root: volumes are not bind-mounted at their mountPaths; pods get the "
                "service account through KUBECONFIG instead"
            )

    # -- cache ----------------------------------------------------------------------------

    def _on_pod(self, uid: str, pod: dict[str, Any] | None) -> None:
        with self._lock:
            if pod is None:
                self._cache.pop(uid, None)
                self._done.discard(uid)
            else:
                self._cache[uid] = pod
        self.queue.add(uid)

    def _on_list(self, pods: list[dict[str, Any]]) -> None:
        live = {str(p["metadata"]["uid"]): p for p in pods}
        with self._lock:
            gone = (set(self._cache) | set(self._workers)) - set(live)
            self._cache = live
            self._done &= set(live)
        for uid in [*live, *gone]:
            self.queue.add(uid)

    def _local_pods(self) -> list[LocalPod]:
        """Each pod this agent runs in a network namespace, with that namespace and its
        address."""
        with self._lock:
            workers = list(self._workers.values())
        return [
            LocalPod(w.pod, w.net.netns, w.net.ip)
            for w in workers
            if w.pod and w.net and w.net.netns
        ]

    def _find_pod(self, namespace: str, name: str) -> Path | None:
        with self._lock:
            for uid, pod in self._cache.items():
                meta = pod.get("metadata") or {}
                if meta.get("namespace") == namespace and meta.get("name") == name:
                    return self.ctx.pods_dir / uid
        return None

    # -- start-up -------------------------------------------------------------------------

    def _adopt_leftovers(self) -> None:
        """Workers for pod dirs of a previous agent: re-adopt or tear down."""
        pods_dir = self.ctx.pods_dir
        if not pods_dir.is_dir():
            return
        for d in sorted(p for p in pods_dir.iterdir() if p.is_dir()):
            uid = d.name
            with self._lock:
                pod = self._cache.get(uid)
            node = str((pod or {}).get("spec", {}).get("nodeName") or "")
            if pod is None:
                log.info("pod %s is no longer in the API; stopping what is left of it", uid)
            self._workers[uid] = PodWorker(uid, node, self.ctx, pod)
            self.queue.add(uid)

    def run(self) -> None:
        """Run until `stop` is set."""
        self.heartbeat.register_all()
        if self.stop.is_set():
            return
        if self.ctx.cpu is not None:
            self.ctx.cpu.apply()  # before any pod (re-adopted or new) is placed
        if self.ctx.template is not None:
            self.ctx.template.start()  # imports while the nodes register and pods list
        threading.Thread(target=self.heartbeat.run, name="heartbeat", daemon=True).start()
        if self.ctx.policies is not None:
            threading.Thread(target=self.ctx.policies.run, name="policies", daemon=True).start()
        ips = [self.ctx.fabric.node_ip(n.name) for n in self.nodes]
        LogServer(ips, self._find_pod, self.state_dir / "nodeagent").start()
        while not self.stop.is_set():
            try:
                self.watcher.list()
                break
            except Exception as e:
                log.warning("initial pod list failed: %s", e)
                self.stop.wait(2.0)
        self._adopt_leftovers()
        for i in range(WORKERS):
            threading.Thread(target=self._work, name=f"pod-worker-{i}", daemon=True).start()
        threading.Thread(target=self.watcher.run, name="pod-watch", daemon=True).start()
        log.info("node agent running for %s", ", ".join(sorted(self.node_names)))
        self.stop.wait()
        self.queue.shutdown()

    # -- work -----------------------------------------------------------------------------

    def _work(self) -> None:
        while (uid := self.queue.get()) is not None:
            try:
                self._sync(uid)
            except Exception:
                log.exception("pod %s: sync failed", uid)
                self.queue.add_after(uid, RETRY_S)
            finally:
                self.queue.done(uid)

    def _sync(self, uid: str) -> None:
        with self._lock:
            pod = self._cache.get(uid)
            worker = self._workers.get(uid)
            done = uid in self._done
        if worker is None:
            if pod is None or done:
                return
            worker = PodWorker(uid, str(pod["spec"]["nodeName"]), self.ctx, pod)
            with self._lock:
                self._workers[uid] = worker
        delay = worker.sync(pod)
        if worker.finished:
            with self._lock:
                self._workers.pop(uid, None)
                if uid in self._cache:
                    self._done.add(uid)
        elif delay is not None:
            self.queue.add_after(uid, delay)
