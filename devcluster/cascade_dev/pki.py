"""The cluster's certificates, made locally with `cryptography` (no cfssl/openssl needed).

One CA signs: the API server's serving cert (valid for 127.0.0.1, the fabric host address
and the in-cluster `kubernetes` Service names), an admin client cert in system:masters,
and client certs for the controller-manager and scheduler (their RBAC users exist by
default). A separate RSA key pair signs service-account tokens. Existing files are kept,
so `up` after `down` reuses them; the serving cert is reissued when its SANs fall short.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from cascade_dev.topology import NETNS_HOST_IP

FIRST_SERVICE_IP = "198.19.0.1"
SERVICE_CIDR = "198.19.0.0/16"
API_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
# Client identities: file stem -> (CN, O).
CLIENTS = {
    "admin": ("cascade-admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", None),
    "scheduler": ("system:kube-scheduler", None),
}
_PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def apiserver_sans(extra_ips: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """DNS names and IPs the serving cert must cover."""
    ips = ["127.0.0.1", NETNS_HOST_IP, FIRST_SERVICE_IP]
    ips += [ip for ip in extra_ips if ip not in ips]
    return list(API_DNS_NAMES), ips


@dataclass(frozen=True)
class Pki:
    dir: Path

    def crt(self, stem: str) -> Path:
        return self.dir / f"{stem}.crt"

    def key(self, stem: str) -> Path:
        return self.dir / f"{stem}.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: _PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def make_ca(cn: str = "cascade-dev-ca") -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def issue(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    cn: str,
    *,
    org: str | None = None,
    dns: list[str] | None = None,
    ips: list[str] | None = None,
    server: bool = False,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A leaf cert signed by the CA: serving (with SANs) or client."""
    key = _new_key()
    now = dt.datetime.now(dt.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn, org))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=825))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, True, False, False, False, False, False, False),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if dns or ips:
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns or []]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips or []]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def cert_sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    dns = set(ext.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in ext.get_values_for_type(x509.IPAddress)}
    return dns, ips


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    path.chmod(0o600 if private else 0o644)


def _save(pki: Pki, stem: str, key: _PrivateKey, cert: x509.Certificate) -> None:
    _write(pki.key(stem), _key_pem(key), private=True)
    _write(pki.crt(stem), cert.public_bytes(serialization.Encoding.PEM))


def ensure_pki(pki_dir: Path, extra_ips: tuple[str, ...] = ()) -> Pki:
    """Create whatever is missing under pki_dir; keep what is there and still valid."""
    pki = Pki(pki_dir)
    pki_dir.mkdir(parents=True, exist_ok=True)
    pki_dir.chmod(0o700)
    if not (pki.crt("ca").exists() and pki.key("ca").exists()):
        _save(pki, "ca", *make_ca())
        for stale in pki_dir.glob("*.crt"):
            if stale.name != "ca.crt":
                stale.unlink()
    ca_cert = x509.load_pem_x509_certificate(pki.crt("ca").read_bytes())
    ca_key = serialization.load_pem_private_key(pki.key("ca").read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    dns, ips = apiserver_sans(extra_ips)
    crt = pki.crt("apiserver")
    have = cert_sans(x509.load_pem_x509_certificate(crt.read_bytes())) if crt.exists() else None
    if have is None or not (set(dns) <= have[0] and set(ips) <= have[1]):
        _save(
            pki,
            "apiserver",
            *issue(ca_key, ca_cert, "kube-apiserver", dns=dns, ips=ips, server=True),
        )
    for stem, (cn, org) in CLIENTS.items():
        if not (pki.crt(stem).exists() and pki.key(stem).exists()):
            _save(pki, stem, *issue(ca_key, ca_cert, cn, org=org))
    if not (pki.sa_key.exists() and pki.sa_pub.exists()):
        sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write(pki.sa_key, _key_pem(sa), private=True)
        pub = sa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        _write(pki.sa_pub, pub)
    return pki
