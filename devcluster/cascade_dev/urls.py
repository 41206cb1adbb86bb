"""`cascade dev url NAMESPACE/SERVICE[:PORT]`: a URL that reaches one ready endpoint.

The local cluster has no kube-proxy, so Service IPs route nowhere. Instead we follow
Service -> Endpoints -> (pod IP, target port) ourselves. Pure functions over the API's
JSON, so the resolution rules are unit-tested without a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ResolveError(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    namespace: str
    service: str
    port: str | None  # a Service port name or number; None: the Service's only port


def parse_target(text: str) -> Target:
    """'ns/svc', 'ns/svc:8000' or 'ns/svc:http'."""
    ns, sep, rest = text.partition("/")
    if not sep or not ns or not rest:
        raise ResolveError(f"expected NAMESPACE/SERVICE[:PORT], got {text!r}")
    svc, _, port = rest.partition(":")
    if not svc:
        raise ResolveError(f"expected NAMESPACE/SERVICE[:PORT], got {text!r}")
    return Target(ns, svc, port or None)


def _service_port(service: dict[str, Any], want: str | None) -> dict[str, Any]:
    ports: list[dict[str, Any]] = service.get("spec", {}).get("ports") or []
    name = service.get("metadata", {}).get("name", "?")
    if not ports:
        raise ResolveError(f"service {name} has no ports")
    if want is None:
        if len(ports) > 1:
            listing = ", ".join(str(p.get("name") or p["port"]) for p in ports)
            raise ResolveError(f"service {name} has several ports ({listing}); pick one")
        return ports[0]
    for p in ports:
        if want == p.get("name") or want == str(p.get("port")):
            return p
    raise ResolveError(f"service {name} has no port {want!r}")


def resolve_url(service: dict[str, Any], endpoints: dict[str, Any], port: str | None) -> str:
    """http://IP:PORT of the first ready address (by IP) serving the chosen Service port."""
    sport = _service_port(service, port)
    sname = sport.get("name") or ""
    candidates: list[tuple[tuple[int, ...], str, int]] = []
    for subset in endpoints.get("subsets") or []:
        eports: list[dict[str, Any]] = subset.get("ports") or []
        match = [p for p in eports if (p.get("name") or "") == sname]
        if not match and len(eports) == 1 and not sname:
            match = eports
        if not match:
            continue
        for addr in subset.get("addresses") or []:  # notReadyAddresses are skipped
            ip = addr["ip"]
            key = tuple(int(x) for x in ip.split(".")) if "." in ip else (0,)
            candidates.append((key, ip, int(match[0]["port"])))
    if not candidates:
        name = service.get("metadata", {}).get("name", "?")
        raise ResolveError(f"service {name} port {sname or sport['port']}: no ready endpoints")
    _, ip, tport = min(candidates)
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{tport}"
