"""Pod volumes as host directories under `pods/<uid>/volumes/<name>/`.

Secret, configMap, downwardAPI and projected volumes are written as files (atomically,
in place, so a directory already bind-mounted into a running container sees updates);
emptyDir is a directory; hostPath and a PVC bound to a hostPath/local PV resolve to
that host path. `mounts_for` maps a container's volumeMounts to bind mounts, and
`sa_kubeconfig` is the fallback for processes that cannot get the service account
token at its well-known path (no mount namespace without root).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .env import EnvError, field_ref, object_bytes, resource_ref
from .runner import Mount

SA_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


class VolumeError(Exception):
    """A volume cannot be set up yet (missing secret, unbound claim ...); retried."""


class VolumeSource(Protocol):
    def get(self, path: str) -> dict[str, Any] | None: ...
    def create_token(self, namespace: str, sa: str, audience: str | None, seconds: int) -> str: ...


def _write(target: Path, rel: str, data: bytes, mode: int) -> None:
    path = (target / rel).resolve()
    if target.resolve() not in path.parents:
        raise VolumeError(f"volume item path {rel!r} escapes the volume")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    tmp.replace(path)


def _write_keys(
    target: Path, data: Mapping[str, bytes], src: Mapping[str, Any], default_mode: int
) -> None:
    items = src.get("items")
    if not items:
        for k, v in data.items():
            _write(target, k, v, default_mode)
        return
    for it in items:
        key = str(it["key"])
        if key not in data:
            if src.get("optional"):
                continue
            raise VolumeError(
                f'key "{key}" not found in "{src.get("name") or src.get("secretName")}"'
            )
        _write(target, str(it.get("path") or key), data[key], int(it.get("mode") or default_mode))


def _object(
    api: VolumeSource, path: str, src: Mapping[str, Any], what: str
) -> dict[str, bytes] | None:
    obj = api.get(path)
    if obj is None:
        if src.get("optional"):
            return None
        raise VolumeError(f'{what} "{path.rsplit("/", 1)[-1]}" not found')
    return object_bytes(obj)


def _downward(
    pod: Mapping[str, Any],
    target: Path,
    items: Sequence[Mapping[str, Any]],
    mode: int,
    pod_ip: str,
    host_ip: str,
) -> None:
    containers = {c["name"]: c for c in (pod.get("spec") or {}).get("containers") or []}
    for it in items:
        try:
            if "fieldRef" in it:
                value = field_ref(
                    pod, str(it["fieldRef"]["fieldPath"]), pod_ip=pod_ip, host_ip=host_ip
                )
            else:
                ref = it.get("resourceFieldRef") or {}
                value = resource_ref(
                    containers.get(ref.get("containerName"), {}), str(ref.get("resource"))
                )
        except EnvError as e:
            raise VolumeError(str(e)) from e
        _write(target, str(it["path"]), value.encode(), int(it.get("mode") or mode))


def _claim_path(api: VolumeSource, ns: str, claim: str) -> Path:
    pvc = api.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{claim}")
    if pvc is None:
        raise VolumeError(f'persistentvolumeclaim "{claim}" not found')
    pv_name = (pvc.get("spec") or {}).get("volumeName")
    if not pv_name or (pvc.get("status") or {}).get("phase") != "Bound":
        raise VolumeError(f'persistentvolumeclaim "{claim}" is not bound yet')
    pv = api.get(f"/api/v1/persistentvolumes/{pv_name}") or {}
    spec = pv.get("spec") or {}
    host = (spec.get("hostPath") or spec.get("local") or {}).get("path")
    if not host:
        raise VolumeError(f'persistentvolume "{pv_name}" is neither hostPath nor local')
    Path(host).mkdir(parents=True, exist_ok=True)
    return Path(host)


def _own(root: Path, pod_security: Mapping[str, Any]) -> None:
    """A claim's files owned by the pod's fsGroup, group-writable (directories setgid),
    as the kubelet does for a volume that supports ownership management; with
    fsGroupChangePolicy OnRootMismatch only when the root's group differs."""
    group = pod_security.get("fsGroup")
    if group is None:
        return
    gid = int(group)
    on_mismatch = pod_security.get("fsGroupChangePolicy") == "OnRootMismatch"
    if on_mismatch and root.stat().st_gid == gid:
        return
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        os.chown(path, -1, gid)
        mode = path.stat().st_mode
        extra = 0o2070 if path.is_dir() else (0o060 | (0o010 if mode & 0o100 else 0))
        os.chmod(path, (mode & 0o7777) | extra)


def materialize(
    pod: Mapping[str, Any], pod_dir: Path, api: VolumeSource, *, pod_ip: str, host_ip: str
) -> dict[str, Path]:
    """Create every volume of the pod; volume name -> host path."""
    meta = pod.get("metadata") or {}
    ns = str(meta.get("namespace", "default"))
    out: dict[str, Path] = {}
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        name = str(vol["name"])
        target = pod_dir / "volumes" / name
        if "hostPath" in vol:
            hp = vol["hostPath"]
            if hp.get("type") in ("DirectoryOrCreate", None, ""):
                Path(hp["path"]).mkdir(parents=True, exist_ok=True)
            out[name] = Path(hp["path"])
            continue
        if "persistentVolumeClaim" in vol:
            out[name] = _claim_path(api, ns, str(vol["persistentVolumeClaim"]["claimName"]))
            _own(out[name], (pod.get("spec") or {}).get("securityContext") or {})
            continue
        target.mkdir(parents=True, exist_ok=True)
        out[name] = target
        if "emptyDir" in vol:
            os.chmod(target, 0o777)  # as the kubelet makes it: any container user writes
            continue
        if "secret" in vol or "configMap" in vol:
            _project(pod, target, [vol], 0o644, api, pod_ip, host_ip)
        elif "downwardAPI" in vol:
            src = vol["downwardAPI"]
            _downward(
                pod,
                target,
                src.get("items") or [],
                int(src.get("defaultMode") or 0o644),
                pod_ip,
                host_ip,
            )
        elif "projected" in vol:
            src = vol["projected"]
            _project(
                pod,
                target,
                src.get("sources") or [],
                int(src.get("defaultMode") or 0o644),
                api,
                pod_ip,
                host_ip,
            )
        else:
            raise VolumeError(
                f"volume {name!r}: unsupported volume type {sorted(set(vol) - {'name'})}"
            )
    return out


def _project(
    pod: Mapping[str, Any],
    target: Path,
    sources: Sequence[Mapping[str, Any]],
    mode: int,
    api: VolumeSource,
    pod_ip: str,
    host_ip: str,
) -> None:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    ns = str(meta.get("namespace", "default"))
    for s in sources:
        if "secret" in s:
            src = s["secret"]
            sname = src.get("secretName") or src.get("name")
            data = _object(api, f"/api/v1/namespaces/{ns}/secrets/{sname}", src, "secret")
        elif "configMap" in s:
            src = s["configMap"]
            data = _object(
                api, f"/api/v1/namespaces/{ns}/configmaps/{src.get('name')}", src, "configmap"
            )
        elif "downwardAPI" in s:
            _downward(pod, target, s["downwardAPI"].get("items") or [], mode, pod_ip, host_ip)
            continue
        elif "serviceAccountToken" in s:
            src = s["serviceAccountToken"]
            sa = str(spec.get("serviceAccountName") or "default")
            token = api.create_token(
                ns, sa, src.get("audience"), int(src.get("expirationSeconds") or 3600)
            )
            _write(target, str(src.get("path") or "token"), token.encode(), mode)
            continue
        else:
            raise VolumeError(f"unsupported projected source {sorted(s)}")
        if data is not None:
            _write_keys(target, data, src, int(src.get("defaultMode") or mode))


def mounts_for(container: Mapping[str, Any], paths: Mapping[str, Path]) -> list[Mount]:
    """Bind mounts for a container's volumeMounts (subPath resolved inside the volume)."""
    out: list[Mount] = []
    for vm in container.get("volumeMounts") or []:
        base = paths.get(str(vm["name"]))
        if base is None:
            raise VolumeError(f"volumeMount {vm['name']!r} names no volume")
        src = base / vm["subPath"] if vm.get("subPath") else base
        out.append(Mount(str(src), str(vm["mountPath"]), bool(vm.get("readOnly"))))
    return out


def sa_kubeconfig(server: str, token: str, ca_pem: bytes | None, namespace: str) -> dict[str, Any]:
    """Kubeconfig carrying a pod's service account token (no-mount fallback)."""
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    else:
        cluster["insecure-skip-tls-verify"] = True
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cascade", "cluster": cluster}],
        "users": [{"name": "pod", "user": {"token": token}}],
        "contexts": [
            {
                "name": "pod",
                "context": {"cluster": "cascade", "user": "pod", "namespace": namespace},
            }
        ],
        "current-context": "pod",
    }
