"""Starting a container: from its spec to a running, watched, probed process.

`prepare` turns the container spec into an argv and environment (env with refs, image
mapping, bind mounts, the service-account kubeconfig fallback without root), raising
StartError with the waiting reason kubelet would show (ErrImagePull,
CreateContainerConfigError) when that is not possible yet; `start_container` launches
it, records it, emits kubelet's events and starts its probes.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_api import constants as c
from cascade_dev.cpuquota import confined_from_ready

from . import images, runner
from .containers import Run
from .context import HostEnv
from .env import EnvError, ObjectGetter, base_env, container_env, expand_argv, storage_env
from .identity import Identity, IdentityError, identity
from .kube import TRANSIENT
from .podstate import PodState
from .probes import ContainerProbes
from .runner import Mount, build_argv
from .timeutil import now
from .volumes import SA_MOUNT_PATH, VolumeError, mounts_for, sa_kubeconfig

log = logging.getLogger(__name__)

CONFIG_ERROR = "CreateContainerConfigError"
RUN_ERROR = "RunContainerError"
RETRY_S = 5.0
IMAGE_RETRY_S = 20.0


class StartError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Prepared:
    argv: list[str]
    env: dict[str, str]
    image_id: str
    command: list[str]  # the container's own command line, for the log
    mounts: list[Mount]  # what `argv` bind-mounts (empty where the agent may not mount)
    user: Identity | None = None  # who `argv` runs as (None: the agent's own user)


def _is_exec(p: str) -> bool:
    return os.path.isfile(p) and os.access(p, os.X_OK)


def _write_sa_kubeconfig(
    pod: Mapping[str, Any], pod_dir: Path, mounts: list[Mount], host: HostEnv
) -> Path | None:
    sa = next((m for m in mounts if m.target.rstrip("/") == SA_MOUNT_PATH), None)
    if sa is None:
        return None
    src = Path(sa.source)
    try:
        token = (src / "token").read_text().strip()
    except OSError:
        return None
    ca = (src / "ca.crt").read_bytes() if (src / "ca.crt").exists() else None
    ns = str((pod.get("metadata") or {}).get("namespace", "default"))
    path = pod_dir / "kubeconfig"
    path.write_text(json.dumps(sa_kubeconfig(host.api_server, token, ca, ns)))
    os.chmod(path, 0o600)
    return path


def prepare(
    run: Run,
    pod: Mapping[str, Any],
    *,
    pod_dir: Path,
    prefix: list[str],
    volumes: Mapping[str, Path],
    base: Mapping[str, str],
    pod_ip: str,
    host_ip: str,
    host: HostEnv,
    get_secret: ObjectGetter,
    get_config_map: ObjectGetter,
) -> Prepared:
    spec = run.spec
    try:
        env = container_env(
            spec,
            pod,
            base,
            pod_ip=pod_ip,
            host_ip=host_ip,
            get_secret=get_secret,
            get_config_map=get_config_map,
        )
        mounts = mounts_for(spec, volumes)
        user = identity(pod, spec) if host.can_mount else None  # setuid needs root
    except (EnvError, VolumeError, IdentityError) as e:
        raise StartError(CONFIG_ERROR, str(e)) from e
    resolved = images.resolve(
        run.image,
        expand_argv(list(spec.get("command") or []), env),
        expand_argv(list(spec.get("args") or []), env),
        bin_dir=host.bin_dir,
        which=lambda name: shutil.which(name, path=host.path),
        is_exec=_is_exec,
    )
    if isinstance(resolved, images.Unavailable):
        raise StartError(resolved.reason, resolved.message)
    if not host.can_mount and mounts:
        kc = _write_sa_kubeconfig(pod, pod_dir, mounts, host)
        if kc is not None and "KUBECONFIG" not in env:
            env["KUBECONFIG"] = str(kc)
        log.warning(
            "container %s: not root, volumes are not mounted at their mountPaths "
            "(service account via KUBECONFIG=%s)",
            run.name,
            kc,
        )
    become = user.setpriv_argv() if user is not None else []
    argv = build_argv(resolved.argv, prefix, mounts, can_mount=host.can_mount, become=become)
    shown = mounts if host.can_mount else []
    return Prepared(argv, env, resolved.image_id, resolved.argv, shown, user)


def start_container(w: PodState, run: Run) -> list[float]:
    """Start `run` unless it is backing off; returns when to look again, if needed."""
    t = time.monotonic()
    if run.retry_at is not None and t < run.retry_at:
        return [run.retry_at - t]
    host = w.ctx.host
    base = base_env(
        w.pod,
        pod_ip=w.pod_ip or "",
        node_name=w.node,
        api_host=str(w.ctx.fabric.host_ip),
        path=host.path,
        home=host.home,
    )
    if w.ctx.cpu is not None:
        base.update(w.ctx.cpu.env(w.node, w.pod))
    base.update(storage_env(w.ctx.storage_mbit))  # the pod's own env still wins
    base[c.NODE_EMULATION_ENV] = "1"  # this node's GPUs are emulated (its simulated label)
    kube = w.ctx.kube
    try:
        prep = prepare(
            run,
            w.pod,
            pod_dir=w.dir,
            prefix=w.ctx.fabric.exec_prefix(w.net) if w.net else [],
            volumes=w.volumes or {},
            base=base,
            pod_ip=w.pod_ip or "",
            host_ip=w.host_ip(),
            host=host,
            get_secret=lambda ns, name: kube.get(f"/api/v1/namespaces/{ns}/secrets/{name}"),
            get_config_map=lambda ns, name: kube.get(f"/api/v1/namespaces/{ns}/configmaps/{name}"),
        )
    except StartError as e:
        return _not_started(w, run, e.reason, e.message, IMAGE_RETRY_S)
    except TRANSIENT as e:
        return _not_started(w, run, CONFIG_ERROR, str(e), RETRY_S)
    w.event("Pulled", f'Container image "{run.image}" already present on machine', run)
    try:
        proc = _launch(w, run, prep)
    except OSError as e:
        return _not_started(w, run, RUN_ERROR, str(e), RETRY_S)
    run.confine_pending = w.ctx.cpu is not None and confined_from_ready(run.spec)
    if w.ctx.cpu is not None and not run.confine_pending:
        w.ctx.cpu.confine(w.node, w.pod, proc.pid)  # before its program gets going
    run.started(proc, prep.image_id, now())
    run.checkpoint(w.record_path(run), proc.start_ticks)
    w.ctx.exits.watch(proc, functools.partial(w.on_exit, run.name, proc.pid))
    w.event("Created", f"Created container {run.name}", run)
    w.event("Started", f"Started container {run.name}", run)
    start_probes(w, run)
    return []


def _launch(w: PodState, run: Run, prep: Prepared) -> runner.Proc:
    """Fork the container from the worker template where it serves the program, else
    exec it (also when the template fails: a pod never waits on it)."""
    log_path, pid_path = w.dir / f"{run.name}.log", w.dir / f"{run.name}.pid"
    template = w.ctx.template
    forkable = prep.user is None or prep.user.forkable
    if template is not None and template.serves(prep.command[0]) and forkable:
        netns = w.net.netns if w.net else None
        try:
            return template.launch(
                prep.command, prep.env, w.dir, log_path, pid_path,
                netns=netns, mounts=prep.mounts, user=prep.user,
            )  # fmt: skip
        except OSError as e:
            log.warning("pod %s: %s; exec'ing container %s instead", w.uid, e, run.name)
    return runner.launch(prep.argv, prep.env, w.dir, log_path, pid_path, shown=prep.command)


def _not_started(w: PodState, run: Run, reason: str, message: str, retry: float) -> list[float]:
    run.waiting_reason, run.waiting_message = reason, message
    run.retry_at = time.monotonic() + retry
    if run.last_event != message:
        run.last_event = message
        w.event("Failed", f"Error: {reason}: {message}", run, warning=True)
    return [retry]


def _changed(w: PodState, run: Run) -> None:
    """A probe flipped: the first Ready puts a start-up-unconfined process under its
    node's quota (cpuquota.confined_from_ready); the pod's status is recomputed."""
    if run.confine_pending and run.probes is not None and run.probes.ready:
        run.confine_pending = False
        if w.ctx.cpu is not None and run.pid is not None:
            w.ctx.cpu.confine(w.node, w.pod, run.pid)
    w.ctx.queue.add(w.uid)


def start_probes(w: PodState, run: Run) -> None:
    spec = run.spec
    probed = any(spec.get(k) for k in ("livenessProbe", "readinessProbe", "startupProbe"))
    if run.init or not probed or run.probes is not None:
        return
    name = run.name
    run.probes = ContainerProbes(
        spec,
        w.pod_ip or "127.0.0.1",
        on_change=lambda: _changed(w, run),
        on_fatal=lambda kind, msg: w.on_fatal(name, kind, msg),
        on_failure=lambda kind, msg: w.event(
            "Unhealthy", f"{kind.capitalize()} probe failed: {msg}", run, warning=True
        ),
    )
