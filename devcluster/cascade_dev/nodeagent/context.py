"""What the node agent shares with every pod worker, and what the host gives each container.

The agent builds one `AgentContext` at start-up and hands it to every pod worker; the
steps that advance a pod (sandbox, container start, teardown) reach the API, the fabric,
the host and the nodes' CPU quotas through it. It lives below all of them, so each step
can name these types without importing the worker that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cascade_dev.fabric import Fabric

from .cpu import NodeCpu
from .events import EventRecorder
from .kube import Kube
from .policies import PolicySync
from .procwatch import ExitWatcher
from .templated import WorkerTemplate
from .workqueue import WorkQueue


@dataclass(frozen=True)
class HostEnv:
    """What the host contributes to every container."""

    bin_dir: str
    path: str
    home: str
    can_mount: bool
    api_server: str  # https://host:6443 as pods reach it


@dataclass
class AgentContext:
    """What every pod worker shares."""

    kube: Kube
    fabric: Fabric
    events: EventRecorder
    exits: ExitWatcher
    queue: WorkQueue
    pods_dir: Path
    logs_dir: Path
    host: HostEnv
    cpu: NodeCpu | None = None  # `--node-cpu` quotas; None: every pod runs unconfined
    template: WorkerTemplate | None = None  # forks worker containers; None: exec them
    # `--storage-mbit`: every pod's model storage read rate ($CASCADE_STORAGE_MBIT);
    # None: pods read checkpoints as fast as the disk goes.
    storage_mbit: int | None = None
    # Enforces NetworkPolicies in the pods' namespaces; None: not enforced (no netns).
    policies: PolicySync | None = None
