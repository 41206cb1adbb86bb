"""Certificates for the local cluster: SANs, identities, idempotence."""

from __future__ import annotations

from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from cascade_dev import pki as p


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_apiserver_sans(tmp_path: Path) -> None:
    keys = p.ensure_pki(tmp_path / "pki")
    dns, ips = p.cert_sans(_load(keys.crt("apiserver")))
    assert {"127.0.0.1", "198.18.255.254", "198.19.0.1"} <= ips
    assert {
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    } <= dns


def test_chain_and_identities(tmp_path: Path) -> None:
    keys = p.ensure_pki(tmp_path / "pki")
    ca = _load(keys.crt("ca"))
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    admin = _load(keys.crt("admin"))
    admin.verify_directly_issued_by(ca)
    cn = admin.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    org = admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value
    assert (cn, org) == ("cascade-admin", "system:masters")
    cm = _load(keys.crt("controller-manager"))
    assert cm.subject.rfc4514_string() == "CN=system:kube-controller-manager"
    assert keys.sa_key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY")
    assert keys.sa_pub.read_bytes().startswith(b"-----BEGIN PUBLIC KEY")
    assert oct(keys.key("ca").stat().st_mode & 0o777) == "0o600"


def test_ensure_is_idempotent_and_reissues_short_sans(tmp_path: Path) -> None:
    keys = p.ensure_pki(tmp_path / "pki")
    before = {f.name: f.read_bytes() for f in (tmp_path / "pki").iterdir()}
    p.ensure_pki(tmp_path / "pki")
    assert {f.name: f.read_bytes() for f in (tmp_path / "pki").iterdir()} == before
    p.ensure_pki(tmp_path / "pki", extra_ips=("10.9.8.7",))
    assert "10.9.8.7" in p.cert_sans(_load(keys.crt("apiserver")))[1]
    assert keys.crt("ca").read_bytes() == before["ca.crt"]
    assert keys.crt("admin").read_bytes() == before["admin.crt"]
