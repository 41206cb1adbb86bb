"""The one piece of kubelet's HTTPS API a dev cluster needs: container logs.

`kubectl logs` makes the API server call https://<node address>:10250/containerLogs/
<ns>/<pod>/<container>. Each simulated node's InternalIP is a local address of this
host, so the agent serves that path there, from `pods/<uid>/<container>.log` (self-signed
TLS, no client auth: only the host and the fabric reach these addresses). The API
server must prefer InternalIP (`--kubelet-preferred-address-types=InternalIP`); exec,
attach and port-forward are not offered.

A container's log file holds every run, each after a header line the agent writes at
launch; `previous=true` selects the run before the last.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from .runner import LOG_HEADER

log = logging.getLogger(__name__)

KUBELET_PORT = 10250
FOLLOW_POLL_S = 0.5

# (namespace, pod name) -> the pod's directory, or None when not on these nodes.
FindPod = Callable[[str, str], Path | None]


def split_runs(data: bytes) -> list[bytes]:
    """The output of each run of a container, oldest first (header lines removed)."""
    runs: list[list[bytes]] = [[]]
    for line in data.splitlines(keepends=True):
        if line.startswith(LOG_HEADER):
            runs.append([])
        else:
            runs[-1].append(line)
    out = [b"".join(r) for r in runs]
    return out[1:] if len(out) > 1 and not out[0] else out


def select(data: bytes, *, previous: bool, tail_lines: int | None) -> bytes | None:
    """What `kubectl logs [--previous] [--tail N]` shows; None if there is no such run."""
    runs = split_runs(data)
    if previous:
        if len(runs) < 2:
            return None
        chosen = runs[-2]
    else:
        chosen = runs[-1]
    if tail_lines is not None and tail_lines >= 0:
        lines = chosen.splitlines(keepends=True)
        chosen = b"".join(lines[-tail_lines:]) if tail_lines else b""
    return chosen


def self_signed(ips: Sequence[str], cert: Path, key: Path) -> None:
    """A serving certificate for the node addresses (the API server does not verify it)."""
    pkey = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cascade-node-agent")])
    now = dt.datetime.now(dt.UTC)
    san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(i)) for i in ips])
    crt = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(pkey.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(san, critical=False)
        .sign(pkey, hashes.SHA256())
    )
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(
        pkey.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key.chmod(0o600)
    cert.write_bytes(crt.public_bytes(serialization.Encoding.PEM))


class _Handler(BaseHTTPRequestHandler):
    find: FindPod  # set on the per-server subclass
    server_version = "cascade-node-agent"

    def log_message(self, format: str, *args: object) -> None:
        log.debug("kubelet api: " + format, *args)

    def _text(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if parts == ["healthz"]:
            return self._text(200, b"ok")
        if len(parts) != 4 or parts[0] != "containerLogs":
            return self._text(404, b"the cascade node agent serves only /containerLogs\n")
        _, ns, pod, container = parts
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        pod_dir = self.find(ns, pod)
        if pod_dir is None:
            return self._text(404, f'pod "{pod}" not found in namespace "{ns}"\n'.encode())
        path = pod_dir / f"{container}.log"
        try:
            data = path.read_bytes()
        except OSError:
            msg = f'container "{container}" in pod "{pod}" is waiting to start\n'
            return self._text(400, msg.encode())
        tail = int(q["tailLines"]) if q.get("tailLines", "").lstrip("-").isdigit() else None
        body = select(data, previous=q.get("previous") == "true", tail_lines=tail)
        if body is None:
            msg = f'previous terminated container "{container}" in pod "{pod}" not found\n'
            return self._text(400, msg.encode())
        if q.get("follow") != "true" or q.get("previous") == "true":
            return self._text(200, body)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.end_headers()
        self._follow(path, body, len(data))

    def _follow(self, path: Path, first: bytes, offset: int) -> None:
        """Stream the current run until the container restarts, the pod goes, or the
        client hangs up."""
        try:
            self.wfile.write(first)
            self.wfile.flush()
            while True:
                time.sleep(FOLLOW_POLL_S)
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                offset += len(chunk)
                if not chunk:
                    continue
                head, sep, _ = chunk.partition(LOG_HEADER)
                self.wfile.write(head)
                self.wfile.flush()
                if sep:
                    return
        except OSError:
            return


class LogServer:
    """One HTTPS listener per simulated node address."""

    def __init__(self, ips: Sequence[str], find: FindPod, cert_dir: Path) -> None:
        self._ips, self._find, self._cert_dir = list(ips), find, cert_dir

    def start(self) -> None:
        cert, key = self._cert_dir / "kubelet.crt", self._cert_dir / "kubelet.key"
        self_signed(self._ips, cert, key)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        handler = type("Handler", (_Handler,), {"find": staticmethod(self._find)})
        for ip in self._ips:
            try:
                server = ThreadingHTTPServer((ip, KUBELET_PORT), handler)
            except OSError as e:
                log.warning("kubelet log API not served on %s:%d: %s", ip, KUBELET_PORT, e)
                continue
            server.daemon_threads = True
            # handshake in the handler thread, so one slow client cannot block accept()
            server.socket = ctx.wrap_socket(
                server.socket, server_side=True, do_handshake_on_connect=False
            )
            threading.Thread(
                target=server.serve_forever, name=f"kubelet-api-{ip}", daemon=True
            ).start()
