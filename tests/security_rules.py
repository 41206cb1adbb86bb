"""The Pod Security Standards' `baseline` and `restricted` controls, as checks of a pod.

The local 1.20 API server has no Pod Security admission, so tests check every pod the
operator and the chart render against the published rules
(https://kubernetes.io/docs/concepts/security/pod-security-standards/), control by
control: `violations(pod)` lists what the `restricted` profile (which includes
`baseline`) refuses, each entry starting with the control's name. `allow_add` names
capabilities a caller tolerates on purpose (the RDMA worker's IPC_LOCK, documented in
docs/security.md); the caller asserts that exception itself. Pure, no cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

Manifest = Mapping[str, Any]

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
CONFINED_SECCOMP = frozenset({"RuntimeDefault", "Localhost"})
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def pod_of(obj: Manifest) -> Manifest:
    """The pod (metadata and spec) of a Pod, or the pod template of a workload."""
    if obj.get("kind") == "Pod":
        return obj
    spec = obj.get("spec") or {}
    if "jobTemplate" in spec:  # a CronJob
        spec = spec["jobTemplate"].get("spec") or {}
    return spec["template"]


def _containers(spec: Manifest) -> Iterator[Manifest]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(kind) or []


def _ctx(container: Manifest) -> Manifest:
    return container.get("securityContext") or {}


def _contexts(spec: Manifest) -> Iterator[tuple[str, Manifest]]:
    """(where, securityContext) of the pod and then of every container."""
    yield "pod", spec.get("securityContext") or {}
    for container in _containers(spec):
        yield f"container {container.get('name')}", _ctx(container)


Rule = Callable[[Manifest, Manifest, Collection[str]], Iterator[str]]


def host_process(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for where, ctx in _contexts(spec):
        if (ctx.get("windowsOptions") or {}).get("hostProcess"):
            yield f"hostProcess: {where} is a Windows HostProcess"


def host_namespaces(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            yield f"host namespaces: {field} is true"


def privileged(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for container in _containers(spec):
        if _ctx(container).get("privileged"):
            yield f"privileged: container {container.get('name')} is privileged"


def _added(container: Manifest) -> list[str]:
    return list((_ctx(container).get("capabilities") or {}).get("add") or [])


def capabilities_baseline(meta: Manifest, spec: Manifest, allow: Collection[str]) -> Iterator[str]:
    for container in _containers(spec):
        extra = [c for c in _added(container) if c not in BASELINE_CAPABILITIES | set(allow)]
        if extra:
            yield f"capabilities: container {container.get('name')} adds {extra}"


def host_path_volumes(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            yield f"hostPath volumes: volume {volume.get('name')} is a hostPath"


def host_ports(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for container in _containers(spec):
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                yield f"host ports: container {container.get('name')} binds {port['hostPort']}"


def apparmor(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for where, ctx in _contexts(spec):
        kind = (ctx.get("appArmorProfile") or {}).get("type")
        if kind not in (None, "RuntimeDefault", "Localhost"):
            yield f"AppArmor: {where} profile {kind}"
    for key, value in (meta.get("annotations") or {}).items():
        if key.startswith(APPARMOR_ANNOTATION) and not (
            value == "runtime/default" or str(value).startswith("localhost/")
        ):
            yield f"AppArmor: annotation {key}={value}"


def selinux(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for where, ctx in _contexts(spec):
        options = ctx.get("seLinuxOptions") or {}
        if options.get("type", "") not in SELINUX_TYPES:
            yield f"SELinux: {where} type {options['type']}"
        for field in ("user", "role"):
            if options.get(field):
                yield f"SELinux: {where} sets {field}"


def proc_mount(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for container in _containers(spec):
        if _ctx(container).get("procMount") not in (None, "Default"):
            yield f"/proc mount type: container {container.get('name')} unmasks /proc"


def seccomp_baseline(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for where, ctx in _contexts(spec):
        if (ctx.get("seccompProfile") or {}).get("type") == "Unconfined":
            yield f"seccomp: {where} is Unconfined"


def sysctls(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for sysctl in (spec.get("securityContext") or {}).get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            yield f"sysctls: {sysctl.get('name')} is not in the safe set"


def volume_types(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            yield f"volume types: volume {volume.get('name')} is {sorted(kinds)}"


def privilege_escalation(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for container in _containers(spec):
        if _ctx(container).get("allowPrivilegeEscalation") is not False:
            yield f"privilege escalation: container {container.get('name')} does not forbid it"


def non_root(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    pod = (spec.get("securityContext") or {}).get("runAsNonRoot") is True
    for container in _containers(spec):
        own = _ctx(container).get("runAsNonRoot")
        if own is False or (own is None and not pod):
            yield f"running as non-root: container {container.get('name')} may run as root"


def non_root_user(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    for where, ctx in _contexts(spec):
        if ctx.get("runAsUser") == 0:
            yield f"running as non-root user: {where} runs as uid 0"


def seccomp_restricted(meta: Manifest, spec: Manifest, _: Collection[str]) -> Iterator[str]:
    pod = ((spec.get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    if pod is not None and pod not in CONFINED_SECCOMP:
        yield f"seccomp: pod profile {pod}"
    for container in _containers(spec):
        own = (_ctx(container).get("seccompProfile") or {}).get("type")
        if own is None and pod in CONFINED_SECCOMP:
            continue
        if own not in CONFINED_SECCOMP:
            yield f"seccomp: container {container.get('name')} profile {own}"


def capabilities_restricted(
    meta: Manifest, spec: Manifest, allow: Collection[str]
) -> Iterator[str]:
    for container in _containers(spec):
        name = container.get("name")
        if "ALL" not in ((_ctx(container).get("capabilities") or {}).get("drop") or []):
            yield f"capabilities: container {name} does not drop ALL"
        extra = [c for c in _added(container) if c not in RESTRICTED_CAPABILITIES | set(allow)]
        if extra:
            yield f"capabilities: container {name} adds {extra}"


BASELINE: tuple[Rule, ...] = (
    host_process,
    host_namespaces,
    privileged,
    capabilities_baseline,
    host_path_volumes,
    host_ports,
    apparmor,
    selinux,
    proc_mount,
    seccomp_baseline,
    sysctls,
)
RESTRICTED: tuple[Rule, ...] = (
    *BASELINE,
    volume_types,
    privilege_escalation,
    non_root,
    non_root_user,
    seccomp_restricted,
    capabilities_restricted,
)


def violations(obj: Manifest, allow_add: Collection[str] = ()) -> list[str]:
    """What the `restricted` profile refuses in `obj` (a Pod or a workload's template)."""
    pod = pod_of(obj)
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return sorted({v for rule in RESTRICTED for v in rule(meta, spec, allow_add)})


def added_capabilities(obj: Manifest) -> list[str]:
    """Every capability some container of the pod adds."""
    return sorted({c for container in _containers(pod_of(obj)["spec"]) for c in _added(container)})
