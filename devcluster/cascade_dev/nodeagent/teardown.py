"""Stopping a pod: graceful kill, fabric detach, final delete, and cleaning up after it.

Like kubelet: SIGTERM every container's process group, SIGKILL whatever still runs when
the grace period (the deletion's, else the spec's, at most 30 s) is over, release the
pod's network, then delete the Pod object with grace 0 and a uid precondition so a new
pod with the same name is never touched. A pod that vanished from the API (force
delete, or gone while no agent ran) goes the same way minus the delete. Logs survive
under logs/pods/<ns>_<name>_<uid8>/; the pod directory (secrets included) does not.
"""

from __future__ import annotations

import logging
import shutil
import signal
import time

from . import lifecycle
from .kube import TRANSIENT
from .podstate import PodState

log = logging.getLogger(__name__)

RETRY_S = 5.0


def terminate(w: PodState, exists: bool) -> float | None:
    """One step of tearing the pod down; seconds until the next step, None when done."""
    t = time.monotonic()
    if w.term_deadline is None:
        w.term_deadline = t + lifecycle.grace_period(w.pod or None)
        for run in w.runs.values():
            if run.probes:
                run.probes.stop()
            if run.proc is not None:
                w.event("Killing", f"Stopping container {run.name}", run)
                run.proc.signal(signal.SIGTERM)
    w.drain()
    alive = [r.proc for r in w.runs.values() if r.proc is not None and r.proc.alive()]
    if alive:
        if t < w.term_deadline:
            return w.term_deadline - t
        for proc in alive:
            proc.signal(signal.SIGKILL)
        return 1.0
    w.detach()
    archive(w)
    if exists:
        m = w.pod.get("metadata") or {}
        try:
            w.ctx.kube.delete_pod_now(str(m.get("namespace")), str(m.get("name")), w.uid)
        except TRANSIENT as e:
            log.warning("pod %s: final delete failed: %s", w.uid, e)
            return RETRY_S
    log.info("pod %s torn down", w.uid)
    w.finished = True
    return None


def archive(w: PodState) -> None:
    m = w.pod.get("metadata") or {}
    label = f"{m.get('namespace', 'orphan')}_{m.get('name', 'pod')}_{w.uid[:8]}"
    logs = list(w.dir.glob("*.log"))
    if logs:
        dest = w.ctx.logs_dir / label
        dest.mkdir(parents=True, exist_ok=True)
        for f in logs:
            shutil.move(str(f), dest / f.name)
    shutil.rmtree(w.dir, ignore_errors=True)
