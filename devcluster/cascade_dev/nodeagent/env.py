"""Container environment resolution (pure; API reads are injected getters).

Kubelet semantics, reduced to what Cascade's pods use: the agent's base variables
(POD_IP, POD_NAME, POD_NAMESPACE, NODE_NAME, KUBERNETES_SERVICE_HOST/PORT, PATH with
the venv bin dir first, the cluster's CASCADE_STORAGE_MBIT), then `envFrom`, then `env`
(later wins). Values may reference earlier variables as $(VAR); `$$` escapes a dollar.
A missing secret/configMap/key that is not optional raises EnvError, which the pod
worker reports as CreateContainerConfigError and retries.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from typing import Any

API_PORT = 6443
STORAGE_MBIT_ENV = "CASCADE_STORAGE_MBIT"

# (namespace, name) -> the object as a dict, or None when it does not exist.
ObjectGetter = Callable[[str, str], Mapping[str, Any] | None]


class EnvError(Exception):
    """The container's environment references something that does not exist."""


def object_bytes(obj: Mapping[str, Any]) -> dict[str, bytes]:
    """Key -> bytes of a Secret (base64 `data`) or ConfigMap (`data`, `binaryData`)."""
    out: dict[str, bytes] = {}
    is_secret = obj.get("kind") == "Secret" or "type" in obj
    for k, v in (obj.get("binaryData") or {}).items():
        out[k] = base64.b64decode(v)
    for k, v in (obj.get("data") or {}).items():
        out[k] = base64.b64decode(v) if is_secret else str(v).encode()
    return out


def object_data(obj: Mapping[str, Any]) -> dict[str, str]:
    """Key -> text of a Secret or ConfigMap."""
    return {k: v.decode("utf-8", "replace") for k, v in object_bytes(obj).items()}


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")


def field_ref(pod: Mapping[str, Any], path: str, *, pod_ip: str, host_ip: str) -> str:
    """The value of a downward-API fieldPath for this pod."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    m = _SUBSCRIPT.match(path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple: dict[str, Any] = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
    }
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    if path not in simple:
        raise EnvError(f"unsupported fieldPath {path!r}")
    return str(simple[path])


def resource_ref(container: Mapping[str, Any], resource: str) -> str:
    """limits.cpu / requests.memory ... as written in the spec ("0" when unset)."""
    kind, _, name = resource.partition(".")
    res = (container.get("resources") or {}).get(kind) or {}
    return str(res.get(name, "0"))


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes $(VAR) expansion: defined vars substituted, others left, $$ -> $."""
    out: list[str] = []
    i = 0
    while i < len(value):
        if value.startswith("$$", i):
            out.append("$")
            i += 2
        elif value.startswith("$(", i) and (end := value.find(")", i + 2)) != -1:
            name = value[i + 2 : end]
            out.append(env[name] if name in env else value[i : end + 1])
            i = end + 1
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def base_env(
    pod: Mapping[str, Any], *, pod_ip: str, node_name: str, api_host: str, path: str, home: str
) -> dict[str, str]:
    meta = pod.get("metadata") or {}
    return {
        "PATH": path,
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "POD_IP": pod_ip,
        "POD_NAME": str(meta.get("name", "")),
        "POD_NAMESPACE": str(meta.get("namespace", "")),
        "NODE_NAME": node_name,
        "KUBERNETES_SERVICE_HOST": api_host,
        "KUBERNETES_SERVICE_PORT": str(API_PORT),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(API_PORT),
        "KUBERNETES_PORT": f"tcp://{api_host}:{API_PORT}",
    }


def storage_env(storage_mbit: int | None) -> dict[str, str]:
    """The cluster's model storage rate for a pod's base environment (the worker paces
    its checkpoint reads by it); a pod's own `env` still overrides it."""
    return {STORAGE_MBIT_ENV: str(storage_mbit)} if storage_mbit else {}


def _lookup(get: ObjectGetter, ns: str, ref: Mapping[str, Any], what: str) -> dict[str, str] | None:
    obj = get(ns, str(ref.get("name", "")))
    if obj is None:
        if ref.get("optional"):
            return None
        raise EnvError(f'{what} "{ref.get("name")}" not found')
    return object_data(obj)


def _value_from(
    src: Mapping[str, Any],
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    ctx: tuple[str, str, ObjectGetter, ObjectGetter],
) -> str | None:
    pod_ip, host_ip, get_secret, get_config_map = ctx
    ns = str((pod.get("metadata") or {}).get("namespace", "default"))
    if "fieldRef" in src:
        return field_ref(
            pod, str(src["fieldRef"].get("fieldPath", "")), pod_ip=pod_ip, host_ip=host_ip
        )
    if "resourceFieldRef" in src:
        return resource_ref(container, str(src["resourceFieldRef"].get("resource", "")))
    for key, get, what in (
        ("secretKeyRef", get_secret, "secret"),
        ("configMapKeyRef", get_config_map, "configmap"),
    ):
        if key in src:
            ref = src[key]
            data = _lookup(get, ns, ref, what)
            if data is None:
                return None
            if ref.get("key") not in data:
                if ref.get("optional"):
                    return None
                raise EnvError(f'key "{ref.get("key")}" not found in {what} "{ref.get("name")}"')
            return data[str(ref["key"])]
    raise EnvError(f"unsupported valueFrom {sorted(src)}")


def container_env(
    container: Mapping[str, Any],
    pod: Mapping[str, Any],
    base: Mapping[str, str],
    *,
    pod_ip: str,
    host_ip: str,
    get_secret: ObjectGetter,
    get_config_map: ObjectGetter,
) -> dict[str, str]:
    """The full environment of one container process."""
    env = dict(base)
    ns = str((pod.get("metadata") or {}).get("namespace", "default"))
    for src in container.get("envFrom") or []:
        prefix = str(src.get("prefix", ""))
        if "configMapRef" in src:
            data = _lookup(get_config_map, ns, src["configMapRef"], "configmap")
        elif "secretRef" in src:
            data = _lookup(get_secret, ns, src["secretRef"], "secret")
        else:
            data = None
        for k, v in (data or {}).items():
            env[prefix + k] = v
    ctx = (pod_ip, host_ip, get_secret, get_config_map)
    for item in container.get("env") or []:
        name = str(item["name"])
        if "valueFrom" in item:
            value = _value_from(item["valueFrom"], pod, container, ctx)
            if value is not None:
                env[name] = value
        else:
            env[name] = expand(str(item.get("value", "")), env)
    return env


def expand_argv(argv: list[str], env: Mapping[str, str]) -> list[str]:
    return [expand(a, env) for a in argv]
