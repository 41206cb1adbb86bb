"""Where a worker pod reads its model from: a path on the node (file://) or a mounted
PersistentVolumeClaim (pvc://claim/path, read-only). Pure."""

from __future__ import annotations

from typing import Any

from cascade_api.modeldeployment import ModelDeploymentSpec

Manifest = dict[str, Any]
MODEL_MOUNT_ROOT = "/mnt/models"


def model_volume(spec: ModelDeploymentSpec) -> tuple[str, list[Manifest], list[Manifest]]:
    """(path the worker reads the model from, volumes, volumeMounts)."""
    uri = spec.model.uri
    if uri.startswith("file://"):
        return uri.removeprefix("file://"), [], []
    claim, _, path = uri.removeprefix("pvc://").partition("/")
    mount = f"{MODEL_MOUNT_ROOT}/{claim}"
    volume = {"name": "model", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
    return f"{mount}/{path}", [volume], [{"name": "model", "mountPath": mount, "readOnly": True}]
