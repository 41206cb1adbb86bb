"""Probe parsing and result counting of the node agent."""

from __future__ import annotations

from cascade_dev.nodeagent.probes import ProbeSpec, ProbeTracker, check, parse_probe

CONTAINER = {
    "ports": [{"name": "http", "containerPort": 8080}, {"name": "ctl", "containerPort": 9000}]
}


def test_parse_http_probe_named_port_and_timing() -> None:
    p = parse_probe(
        {
            "httpGet": {"path": "/readyz", "port": "http"},
            "initialDelaySeconds": 2,
            "periodSeconds": 3,
            "timeoutSeconds": 4,
            "successThreshold": 2,
            "failureThreshold": 5,
        },
        CONTAINER,
    )
    assert p == ProbeSpec("http", 8080, "/readyz", "HTTP", (), 2, 3, 4, 2, 5)


def test_parse_defaults_and_tcp() -> None:
    p = parse_probe({"tcpSocket": {"port": 9000}}, CONTAINER)
    assert p is not None
    assert (p.kind, p.port, p.period, p.timeout, p.success_threshold, p.failure_threshold) == (
        "tcp",
        9000,
        10,
        1,
        1,
        3,
    )
    assert parse_probe(None, CONTAINER) is None


def test_exec_and_unknown_port_are_unsupported() -> None:
    p = parse_probe({"exec": {"command": ["true"]}}, CONTAINER)
    assert p is not None and p.kind == "unsupported" and "exec probes are not supported" in p.error
    assert check(p, "127.0.0.1") == (False, p.error)
    q = parse_probe({"httpGet": {"port": "nope"}}, CONTAINER)
    assert q is not None and q.kind == "unsupported" and "nope" in q.error


def test_readiness_needs_success_threshold() -> None:
    t = ProbeTracker(ProbeSpec("http", 1, success_threshold=2, failure_threshold=2), initial=False)
    assert not t.record(True) and not t.result
    assert t.record(True) and t.result
    assert not t.record(False) and t.result
    assert not t.record(True)  # a success resets the failure streak
    assert not t.record(False)
    assert t.record(False) and not t.result


def test_liveness_exhausts_after_failure_threshold() -> None:
    t = ProbeTracker(ProbeSpec("http", 1, failure_threshold=3), initial=True)
    t.record(False)
    t.record(False)
    assert not t.exhausted
    assert t.record(False) and t.exhausted and not t.result
