"""Container environment resolution of the node agent."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from cascade_dev.nodeagent import env as envmod

POD: dict[str, Any] = {
    "metadata": {
        "name": "w-0",
        "namespace": "ml",
        "uid": "u-1",
        "labels": {"app": "w", "tier": "gpu"},
        "annotations": {"a": "b"},
    },
    "spec": {"nodeName": "cascade-node-1", "serviceAccountName": "worker"},
}
SECRET = {
    "kind": "Secret",
    "type": "Opaque",
    "data": {
        "token": base64.b64encode(b"s3cret").decode(),
        "user": base64.b64encode(b"me").decode(),
    },
}
CM = {"kind": "ConfigMap", "data": {"MODEL": "llama", "LAYERS": "32"}}


def get_secret(ns: str, name: str) -> dict[str, Any] | None:
    return SECRET if (ns, name) == ("ml", "creds") else None


def get_cm(ns: str, name: str) -> dict[str, Any] | None:
    return CM if (ns, name) == ("ml", "model") else None


def base() -> dict[str, str]:
    return envmod.base_env(
        POD,
        pod_ip="198.18.1.2",
        node_name="cascade-node-1",
        api_host="198.18.255.254",
        path="/venv/bin:/usr/bin",
        home="/root",
    )


def resolve(container: dict[str, Any]) -> dict[str, str]:
    return envmod.container_env(
        container,
        POD,
        base(),
        pod_ip="198.18.1.2",
        host_ip="198.18.1.1",
        get_secret=get_secret,
        get_config_map=get_cm,
    )


def test_base_env() -> None:
    e = base()
    assert e["POD_IP"] == "198.18.1.2"
    assert e["POD_NAME"] == "w-0"
    assert e["POD_NAMESPACE"] == "ml"
    assert e["NODE_NAME"] == "cascade-node-1"
    assert e["KUBERNETES_SERVICE_HOST"] == "198.18.255.254"
    assert e["KUBERNETES_SERVICE_PORT"] == "6443"
    assert e["PATH"].startswith("/venv/bin")


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("metadata.name", "w-0"),
        ("metadata.namespace", "ml"),
        ("metadata.uid", "u-1"),
        ("metadata.labels['tier']", "gpu"),
        ("metadata.annotations['a']", "b"),
        ("spec.nodeName", "cascade-node-1"),
        ("spec.serviceAccountName", "worker"),
        ("status.podIP", "198.18.1.2"),
        ("status.hostIP", "198.18.1.1"),
        ("metadata.labels", 'app="w"\ntier="gpu"'),
    ],
)
def test_field_refs(path: str, value: str) -> None:
    c = {"env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": path}}}]}
    assert resolve(c)["X"] == value


def test_secret_and_configmap_refs_and_env_from() -> None:
    c = {
        "envFrom": [
            {"configMapRef": {"name": "model"}},
            {"secretRef": {"name": "creds"}, "prefix": "S_"},
        ],
        "env": [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "M", "valueFrom": {"configMapKeyRef": {"name": "model", "key": "MODEL"}}},
            {"name": "LAYERS", "value": "8"},
        ],
    }
    e = resolve(c)
    assert e["TOKEN"] == "s3cret"
    assert e["M"] == "llama"
    assert e["MODEL"] == "llama"
    assert e["S_user"] == "me"
    assert e["LAYERS"] == "8"  # env wins over envFrom


def test_missing_refs_raise_unless_optional() -> None:
    with pytest.raises(envmod.EnvError, match="not found"):
        resolve(
            {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}]}
        )
    with pytest.raises(envmod.EnvError, match='key "k"'):
        resolve(
            {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "k"}}}]}
        )
    e = resolve(
        {
            "env": [
                {
                    "name": "X",
                    "valueFrom": {
                        "configMapKeyRef": {"name": "nope", "key": "k", "optional": True}
                    },
                }
            ],
            "envFrom": [{"secretRef": {"name": "nope", "optional": True}}],
        }
    )
    assert "X" not in e


def test_container_env_overrides_base_and_expands() -> None:
    c = {
        "env": [
            {"name": "POD_IP", "value": "1.2.3.4"},
            {"name": "URL", "value": "http://$(POD_IP):8080/$(MISSING)/$$(POD_IP)"},
        ]
    }
    e = resolve(c)
    assert e["POD_IP"] == "1.2.3.4"
    assert e["URL"] == "http://1.2.3.4:8080/$(MISSING)/$(POD_IP)"


def test_resource_field_ref() -> None:
    c = {
        "resources": {"limits": {"nvidia.com/gpu": "2"}},
        "env": [
            {"name": "G", "valueFrom": {"resourceFieldRef": {"resource": "limits.nvidia.com/gpu"}}},
            {"name": "C", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu"}}},
        ],
    }
    e = resolve(c)
    assert (e["G"], e["C"]) == ("2", "0")


def test_unsupported_field_path() -> None:
    with pytest.raises(envmod.EnvError):
        resolve({"env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}]})


def test_expand_argv() -> None:
    assert envmod.expand_argv(["--host=$(POD_IP)", "$(NOPE)"], {"POD_IP": "a"}) == [
        "--host=a",
        "$(NOPE)",
    ]


def test_storage_rate_joins_the_base_env_unless_the_pod_sets_it() -> None:
    assert envmod.storage_env(None) == {} and envmod.storage_env(0) == {}
    with_rate = base() | envmod.storage_env(100)
    assert with_rate["CASCADE_STORAGE_MBIT"] == "100"
    args = {
        "pod_ip": "198.18.1.2",
        "host_ip": "198.18.1.1",
        "get_secret": get_secret,
        "get_config_map": get_cm,
    }
    plain = envmod.container_env({"name": "w"}, POD, with_rate, **args)
    assert plain["CASCADE_STORAGE_MBIT"] == "100"
    own = {"name": "w", "env": [{"name": "CASCADE_STORAGE_MBIT", "value": "5"}]}
    assert envmod.container_env(own, POD, with_rate, **args)["CASCADE_STORAGE_MBIT"] == "5"
