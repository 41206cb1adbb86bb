"""List-then-watch of the pods bound to this agent's nodes.

One watch over all pods with a nodeName (field selector `spec.nodeName!=`), filtered to
our nodes here, feeds the agent's cache and work queue. An expired resourceVersion (410)
or a broken connection leads to a fresh list, after which the agent is told the full
set of live pod uids so it can tear down pods deleted while it was not watching.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from .kube import Kube, status_of

log = logging.getLogger(__name__)

SELECTOR = "spec.nodeName!="
WATCH_TIMEOUT_S = 300

OnPod = Callable[[str, dict[str, Any] | None], None]
OnList = Callable[[list[dict[str, Any]]], None]


class PodWatcher:
    def __init__(
        self,
        kube: Kube,
        nodes: Iterable[str],
        on_pod: OnPod,
        on_list: OnList,
        stop: threading.Event,
    ) -> None:
        self._kube, self._nodes = kube, set(nodes)
        self._on_pod, self._on_list, self._stop = on_pod, on_list, stop
        self._rv: str | None = None

    def _ours(self, pod: dict[str, Any]) -> bool:
        return (pod.get("spec") or {}).get("nodeName") in self._nodes

    def list(self) -> None:
        data = self._kube.request("GET", "/api/v1/pods", query={"fieldSelector": SELECTOR})
        self._rv = str(data["metadata"]["resourceVersion"])
        self._on_list([p for p in data.get("items") or [] if self._ours(p)])

    def run(self) -> None:
        delay = 0.5
        while not self._stop.is_set():
            try:
                if self._rv is None:
                    self.list()
                self._watch()
                delay = 0.5
            except Exception as e:  # the watch must outlive any single bad response
                if status_of(e) == 410:
                    self._rv = None
                    continue
                log.warning("pod watch failed (%s); relisting in %.1fs", e, delay)
                self._rv = None
                self._stop.wait(delay)
                delay = min(delay * 2, 10.0)

    def _watch(self) -> None:
        query = {"fieldSelector": SELECTOR, "resourceVersion": self._rv}
        for ev in self._kube.watch("/api/v1/pods", query, WATCH_TIMEOUT_S):
            kind, obj = ev.get("type"), ev.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    self._rv = None
                    return
                raise RuntimeError(f"watch error: {obj.get('message')}")
            self._rv = str((obj.get("metadata") or {}).get("resourceVersion") or self._rv)
            if kind == "BOOKMARK" or not self._ours(obj):
                continue
            uid = str(obj["metadata"]["uid"])
            self._on_pod(uid, None if kind == "DELETED" else obj)
            if self._stop.is_set():
                return
