"""Kubeconfig files for the admin and the control-plane clients.

Certificates are embedded (the `*-data` fields), so a kubeconfig stays valid when copied
elsewhere on this machine, e.g. into a test's temp dir or a pod's volume.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from cascade_dev.paths import APISERVER_PORT
from cascade_dev.pki import Pki

CLUSTER_NAME = "cascade-dev"
DEFAULT_SERVER = f"https://127.0.0.1:{APISERVER_PORT}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def render_kubeconfig(
    *, server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes, user: str
) -> dict[str, Any]:
    """A single-cluster, single-user kubeconfig as a dict (yaml.safe_dump it to write)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER_NAME,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(cert_pem),
                    "client-key-data": _b64(key_pem),
                },
            }
        ],
        "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": user}}],
        "current-context": CLUSTER_NAME,
        "preferences": {},
    }


def write_kubeconfig(path: Path, pki: Pki, stem: str, server: str = DEFAULT_SERVER) -> Path:
    """Write the kubeconfig of client `stem` (admin, controller-manager, scheduler)."""
    doc = render_kubeconfig(
        server=server,
        ca_pem=pki.crt("ca").read_bytes(),
        cert_pem=pki.crt(stem).read_bytes(),
        key_pem=pki.key(stem).read_bytes(),
        user=stem,
    )
    text = yaml.safe_dump(doc, sort_keys=False)
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.chmod(0o600)
        tmp.replace(path)
    return path
