"""`cascade dev url`: Service -> Endpoints -> http://podIP:targetPort."""

from __future__ import annotations

from typing import Any

import pytest

from cascade_dev.urls import ResolveError, Target, parse_target, resolve_url


def _svc(*ports: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "gw"}, "spec": {"ports": list(ports)}}


def _eps(*subsets: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "gw"}, "subsets": list(subsets)}


def test_parse_target() -> None:
    assert parse_target("ns/gw") == Target("ns", "gw", None)
    assert parse_target("ns/gw:8000") == Target("ns", "gw", "8000")
    assert parse_target("ns/gw:http") == Target("ns", "gw", "http")
    for bad in ("gw", "/gw", "ns/", "ns/:80"):
        with pytest.raises(ResolveError):
            parse_target(bad)


def test_single_unnamed_port_uses_target_port() -> None:
    svc = _svc({"port": 80, "targetPort": 8000})
    eps = _eps({"addresses": [{"ip": "198.18.1.3"}], "ports": [{"port": 8000}]})
    assert resolve_url(svc, eps, None) == "http://198.18.1.3:8000"
    assert resolve_url(svc, eps, "80") == "http://198.18.1.3:8000"


def test_named_ports_and_lowest_ready_ip() -> None:
    svc = _svc({"name": "http", "port": 80}, {"name": "metrics", "port": 9090})
    eps = _eps(
        {
            "addresses": [{"ip": "198.18.10.2"}, {"ip": "198.18.9.7"}],
            "notReadyAddresses": [{"ip": "198.18.0.2"}],
            "ports": [{"name": "http", "port": 8000}, {"name": "metrics", "port": 8001}],
        }
    )
    assert resolve_url(svc, eps, "http") == "http://198.18.9.7:8000"
    assert resolve_url(svc, eps, "9090") == "http://198.18.9.7:8001"
    with pytest.raises(ResolveError, match="several ports"):
        resolve_url(svc, eps, None)
    with pytest.raises(ResolveError, match="no port"):
        resolve_url(svc, eps, "grpc")


def test_subsets_with_different_ports() -> None:
    svc = _svc({"name": "http", "port": 80})
    eps = _eps(
        {"addresses": [{"ip": "127.1.0.5"}], "ports": [{"name": "other", "port": 1}]},
        {"addresses": [{"ip": "127.1.1.2"}], "ports": [{"name": "http", "port": 8080}]},
    )
    assert resolve_url(svc, eps, None) == "http://127.1.1.2:8080"


def test_no_ready_endpoints() -> None:
    svc = _svc({"port": 80})
    with pytest.raises(ResolveError, match="no ready endpoints"):
        resolve_url(svc, _eps(), None)
    eps = _eps({"notReadyAddresses": [{"ip": "198.18.0.2"}], "ports": [{"port": 80}]})
    with pytest.raises(ResolveError, match="no ready endpoints"):
        resolve_url(svc, eps, None)
    with pytest.raises(ResolveError, match="no ports"):
        resolve_url(_svc(), eps, None)
