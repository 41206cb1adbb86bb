"""Kubernetes Events for pods, sent in the background so a slow API never holds a pod
worker; best effort, like kubelet's recorder (failures are logged and dropped)."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from .kube import TRANSIENT, Kube
from .timeutil import now, rfc3339

log = logging.getLogger(__name__)


def event_body(
    pod: Mapping[str, Any], node: str, reason: str, message: str, etype: str, field_path: str | None
) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    t = rfc3339(now())
    involved = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "uid": meta.get("uid"),
    }
    if field_path:
        involved["fieldPath"] = field_path
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}",
            "namespace": meta.get("namespace"),
        },
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": etype,
        "source": {"component": "kubelet", "host": node},
        "firstTimestamp": t,
        "lastTimestamp": t,
        "count": 1,
        "reportingComponent": "kubelet",
        "reportingInstance": node,
    }


class EventRecorder:
    def __init__(self, kube: Kube) -> None:
        self._kube = kube
        self._q: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1000)
        threading.Thread(target=self._run, name="events", daemon=True).start()

    def emit(
        self,
        pod: Mapping[str, Any],
        node: str,
        reason: str,
        message: str,
        *,
        warning: bool = False,
        field_path: str | None = None,
    ) -> None:
        (log.warning if warning else log.info)(
            "%s/%s %s: %s",
            (pod.get("metadata") or {}).get("namespace"),
            (pod.get("metadata") or {}).get("name"),
            reason,
            message,
        )
        etype = "Warning" if warning else "Normal"
        with contextlib.suppress(queue.Full):
            self._q.put_nowait(event_body(pod, node, reason, message, etype, field_path))

    def _run(self) -> None:
        while True:
            body = self._q.get()
            try:
                self._kube.request(
                    "POST", f"/api/v1/namespaces/{body['metadata']['namespace']}/events", body=body
                )
            except TRANSIENT as e:
                log.debug("event not recorded: %s", e)
            except Exception:
                log.exception("event not recorded")
