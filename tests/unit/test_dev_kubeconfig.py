"""Kubeconfig rendering: one cluster, one user, certificates embedded."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml

from cascade_dev.kubeconfig import CLUSTER_NAME, render_kubeconfig, write_kubeconfig
from cascade_dev.pki import ensure_pki


def test_render_embeds_data() -> None:
    doc = render_kubeconfig(
        server="https://127.0.0.1:6443", ca_pem=b"CA", cert_pem=b"CERT", key_pem=b"KEY", user="u"
    )
    assert doc["current-context"] == CLUSTER_NAME
    cluster = doc["clusters"][0]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == b"CA"
    user = doc["users"][0]["user"]
    assert base64.b64decode(user["client-certificate-data"]) == b"CERT"
    assert base64.b64decode(user["client-key-data"]) == b"KEY"
    assert doc["contexts"][0]["context"] == {"cluster": CLUSTER_NAME, "user": "u"}


def test_write_is_stable(tmp_path: Path) -> None:
    keys = ensure_pki(tmp_path / "pki")
    path = write_kubeconfig(tmp_path / "kubeconfig", keys, "admin")
    first = path.stat().st_mtime_ns
    write_kubeconfig(path, keys, "admin")
    assert path.stat().st_mtime_ns == first
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    doc = yaml.safe_load(path.read_text())
    cert = base64.b64decode(doc["users"][0]["user"]["client-certificate-data"])
    assert cert == keys.crt("admin").read_bytes()
