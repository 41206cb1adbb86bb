"""Pod hardening: every pod the operator builds passes the Pod Security Standard
`restricted` profile (tests/security_rules.py checks the rendered pods against it).

Why each setting:
- Non-root, as the images' own numeric user (10001, `USER` in Dockerfile.*), so the
  kubelet verifies runAsNonRoot without reading /etc/passwd. fsGroup is that group too,
  so the profile Job can write its artifact into a model claim; OnRootMismatch keeps the
  kubelet from chowning a large model volume file by file at every mount.
- seccomp RuntimeDefault, no privilege escalation, every capability dropped, a read-only
  root filesystem: a compromised worker can neither gain privileges nor change its image.
- The processes still write temporary files and caches (Python's tempfile, torch.compile's
  inductor cache under $TMPDIR, Triton's and CUDA's under $HOME): one emptyDir at
  SCRATCH_PATH with TMPDIR and HOME pointing at it. Not at /tmp: the dev cluster's node
  agent bind-mounts a pod's volumes over host paths, and a model checkout under the
  host's /tmp must stay visible to the worker.
- No service-account token where the pod never calls the API server: workers, host
  copies and the profile Job do not; the gateway does (it discovers its workers).
- RDMA: UCX registers (pins) buffers with the NIC, which needs IPC_LOCK beyond
  RLIMIT_MEMLOCK, so a worker that uses RDMA adds exactly that capability: the one
  documented exception to `restricted` (docs/security.md).

Pure: manifests in, manifests out.
"""

from __future__ import annotations

import copy
from typing import Any

from cascade_api import constants as c
from cascade_operator.config import OperatorConfig

Manifest = dict[str, Any]

RUN_AS = c.POD_USER
SCRATCH_VOLUME = "scratch"
SCRATCH_PATH = "/var/tmp/cascade"
IPC_LOCK = "IPC_LOCK"
# emptyDir bounds (the kubelet evicts a pod past its limit): compile caches are at most a
# few hundred MB; the gateway writes almost nothing.
WORKER_SCRATCH = "4Gi"
GATEWAY_SCRATCH = "64Mi"


def pod_security_context() -> Manifest:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS,
        "runAsGroup": RUN_AS,
        "fsGroup": RUN_AS,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context(pin_memory: bool = False) -> Manifest:
    """Nothing beyond an unprivileged process; `pin_memory` adds IPC_LOCK (RDMA)."""
    capabilities: Manifest = {"drop": ["ALL"]}
    if pin_memory:
        capabilities["add"] = [IPC_LOCK]
    return {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": capabilities,
    }


def worker_context(gpus: int, cfg: OperatorConfig) -> Manifest:
    """An instance's container security context: IPC_LOCK only where it uses RDMA."""
    return container_security_context(pin_memory=uses_rdma(gpus, cfg))


def uses_rdma(gpus: int, cfg: OperatorConfig) -> bool:
    """A worker moves weights over RDMA when it has GPUs and the cluster has an RDMA
    device plugin (chart value rdma.resourceName); otherwise UCX runs over TCP."""
    return gpus > 0 and cfg.rdma


def hardened(
    pod_spec: Manifest, scratch_limit: str = WORKER_SCRATCH, *, api_token: bool = False
) -> Manifest:
    """A copy of `pod_spec` that runs restricted: the pod and container security
    contexts, the scratch emptyDir mounted in every container with TMPDIR and HOME on it,
    and the service-account token only with `api_token`."""
    out = copy.deepcopy(pod_spec)
    out["securityContext"] = pod_security_context()
    out["automountServiceAccountToken"] = api_token
    scratch = {"name": SCRATCH_VOLUME, "emptyDir": {"sizeLimit": scratch_limit}}
    out["volumes"] = [*(out.get("volumes") or []), scratch]
    for container in out["containers"]:
        container["securityContext"] = container_security_context()
        mount = {"name": SCRATCH_VOLUME, "mountPath": SCRATCH_PATH}
        container["volumeMounts"] = [*(container.get("volumeMounts") or []), mount]
        env = container.get("env") or []
        named = {e["name"] for e in env}
        writable = [
            {"name": k, "value": SCRATCH_PATH} for k in ("TMPDIR", "HOME") if k not in named
        ]
        container["env"] = [*env, *writable]
    return out
