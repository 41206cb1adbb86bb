"""The pod sandbox: its network (fabric address and namespace) and its volumes.

Made once per pod worker before any container starts: `Fabric.attach_pod` gives the pod
its IP and namespace (a hostNetwork pod uses the node's own address in the host
namespace instead), then the volumes are materialized under the pod directory. Either
failing leaves the containers in ContainerCreating with the reason as message and an
event (FailedCreatePodSandBox, FailedMount), and the worker retries.
"""

from __future__ import annotations

import logging

from cascade_dev.fabric import PodNet

from .kube import TRANSIENT
from .podstart import start_probes
from .podstate import PodState
from .volumes import VolumeError, materialize

log = logging.getLogger(__name__)


def ensure_sandbox(w: PodState) -> bool:
    """The pod's address and volumes exist (True), or why not is reported (False)."""
    if w.net is None and (w.pod.get("spec") or {}).get("hostNetwork"):
        w.net = PodNet(ip=w.host_ip(), netns=None)  # the node's address, host netns
        w.pod_ip = w.net.ip
    if w.net is None:
        try:
            w.net = w.ctx.fabric.attach_pod(w.node, w.uid)
            w.pod_ip = w.net.ip
            if w.ctx.policies is not None and w.net.netns:
                w.ctx.policies.apply_now(w.pod, w.net.netns)
        except Exception as e:
            log.exception("pod %s: fabric attach failed", w.uid)
            w.event("FailedCreatePodSandBox", f"fabric attach failed: {e}", warning=True)
            return False
    for run in w.runs.values():
        if run.proc is not None:
            start_probes(w, run)  # re-adopted processes get their probes here
    if w.volumes is None:
        w.dir.mkdir(parents=True, exist_ok=True)
        try:
            w.volumes = materialize(
                w.pod,
                w.dir,
                w.ctx.kube,
                pod_ip=w.pod_ip or "",
                host_ip=w.host_ip(),
            )
        except (VolumeError, *TRANSIENT) as e:
            msg = f"MountVolume.SetUp failed: {e}"
            for run in w.runs.values():
                if not run.ran_before:
                    run.waiting_message = msg
            if msg != w.mount_msg:
                w.mount_msg = msg
                w.event("FailedMount", msg, warning=True)
            return False
    return True
