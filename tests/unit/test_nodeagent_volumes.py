"""Volume materialization and mounts of the node agent."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from cascade_dev.nodeagent.volumes import VolumeError, materialize, mounts_for, sa_kubeconfig

SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


class FakeApi:
    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects

    def get(self, path: str) -> dict[str, Any] | None:
        return self.objects.get(path)

    def create_token(self, namespace: str, sa: str, audience: str | None, seconds: int) -> str:
        return f"token-for-{namespace}-{sa}"


def pod(volumes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "1"}},
        "spec": {"serviceAccountName": "sa", "volumes": volumes, "containers": []},
    }


def test_secret_configmap_emptydir_downward(tmp_path: Path) -> None:
    api = FakeApi(
        {
            "/api/v1/namespaces/ns/secrets/tok": {
                "kind": "Secret",
                "type": "x",
                "data": {"token": b64("T"), "ca.crt": b64("CA")},
            },
            "/api/v1/namespaces/ns/configmaps/cfg": {
                "kind": "ConfigMap",
                "data": {"a.yaml": "x: 1"},
            },
        }
    )
    vols = [
        {"name": "token", "secret": {"secretName": "tok", "defaultMode": 0o600}},
        {
            "name": "cfg",
            "configMap": {"name": "cfg", "items": [{"key": "a.yaml", "path": "sub/b.yaml"}]},
        },
        {"name": "scratch", "emptyDir": {}},
        {
            "name": "info",
            "downwardAPI": {
                "items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                    {"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}},
                ]
            },
        },
    ]
    paths = materialize(pod(vols), tmp_path, api, pod_ip="1.2.3.4", host_ip="h")
    assert (paths["token"] / "token").read_text() == "T"
    assert (paths["token"] / "token").stat().st_mode & 0o777 == 0o600
    assert (paths["cfg"] / "sub" / "b.yaml").read_text() == "x: 1"
    assert paths["scratch"].is_dir()
    assert (paths["info"] / "labels").read_text() == 'a="1"'
    assert (paths["info"] / "ip").read_text() == "1.2.3.4"
    assert paths["token"] == tmp_path / "volumes" / "token"
    # idempotent
    assert materialize(pod(vols), tmp_path, api, pod_ip="1.2.3.4", host_ip="h") == paths


def test_projected_with_service_account_token(tmp_path: Path) -> None:
    api = FakeApi(
        {
            "/api/v1/namespaces/ns/configmaps/kube-root-ca.crt": {
                "kind": "ConfigMap",
                "data": {"ca.crt": "CA"},
            }
        }
    )
    vols = [
        {
            "name": "kube-api-access",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        }
                    },
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "namespace",
                                    "fieldRef": {"fieldPath": "metadata.namespace"},
                                }
                            ]
                        }
                    },
                ]
            },
        }
    ]
    p = materialize(pod(vols), tmp_path, api, pod_ip="", host_ip="")["kube-api-access"]
    assert (p / "token").read_text() == "token-for-ns-sa"
    assert (p / "ca.crt").read_text() == "CA"
    assert (p / "namespace").read_text() == "ns"


def test_missing_secret_and_unbound_claim(tmp_path: Path) -> None:
    with pytest.raises(VolumeError, match="not found"):
        materialize(
            pod([{"name": "s", "secret": {"secretName": "x"}}]),
            tmp_path,
            FakeApi({}),
            pod_ip="",
            host_ip="",
        )
    assert materialize(
        pod([{"name": "s", "secret": {"secretName": "x", "optional": True}}]),
        tmp_path,
        FakeApi({}),
        pod_ip="",
        host_ip="",
    )["s"].is_dir()
    api = FakeApi(
        {
            "/api/v1/namespaces/ns/persistentvolumeclaims/c": {
                "spec": {},
                "status": {"phase": "Pending"},
            }
        }
    )
    with pytest.raises(VolumeError, match="not bound"):
        materialize(
            pod([{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]),
            tmp_path,
            api,
            pod_ip="",
            host_ip="",
        )


def test_pvc_bound_to_hostpath_and_hostpath(tmp_path: Path) -> None:
    host = tmp_path / "models"
    api = FakeApi(
        {
            "/api/v1/namespaces/ns/persistentvolumeclaims/c": {
                "spec": {"volumeName": "pv1"},
                "status": {"phase": "Bound"},
            },
            "/api/v1/persistentvolumes/pv1": {"spec": {"hostPath": {"path": str(host)}}},
        }
    )
    vols = [
        {"name": "d", "persistentVolumeClaim": {"claimName": "c"}},
        {"name": "h", "hostPath": {"path": str(tmp_path / "hp"), "type": "DirectoryOrCreate"}},
    ]
    paths = materialize(pod(vols), tmp_path / "pod", api, pod_ip="", host_ip="")
    assert paths == {"d": host, "h": tmp_path / "hp"}
    assert host.is_dir() and (tmp_path / "hp").is_dir()


def test_item_path_cannot_escape(tmp_path: Path) -> None:
    api = FakeApi({"/api/v1/namespaces/ns/configmaps/c": {"data": {"k": "v"}}})
    vols = [
        {"name": "c", "configMap": {"name": "c", "items": [{"key": "k", "path": "../../evil"}]}}
    ]
    with pytest.raises(VolumeError, match="escapes"):
        materialize(pod(vols), tmp_path, api, pod_ip="", host_ip="")


def test_mounts_for_and_subpath() -> None:
    paths = {"tok": Path("/s/tok"), "cfg": Path("/s/cfg")}
    c = {
        "volumeMounts": [
            {"name": "tok", "mountPath": SA, "readOnly": True},
            {"name": "cfg", "mountPath": "/etc/app.yaml", "subPath": "a.yaml"},
        ]
    }
    ms = mounts_for(c, paths)
    assert [(m.source, m.target, m.read_only) for m in ms] == [
        ("/s/tok", SA, True),
        ("/s/cfg/a.yaml", "/etc/app.yaml", False),
    ]
    with pytest.raises(VolumeError):
        mounts_for({"volumeMounts": [{"name": "nope", "mountPath": "/x"}]}, paths)


def test_sa_kubeconfig() -> None:
    kc = sa_kubeconfig("https://127.0.0.1:6443", "tok", b"CA", "ns")
    assert kc["users"][0]["user"]["token"] == "tok"
    assert base64.b64decode(kc["clusters"][0]["cluster"]["certificate-authority-data"]) == b"CA"
    assert kc["contexts"][0]["context"]["namespace"] == "ns"
