"""Container probes: spec parsing and result counting (pure), checks and threads (I/O).

Kubelet semantics: a probe starts after initialDelaySeconds and runs every
periodSeconds with timeoutSeconds; its result flips after successThreshold successes or
failureThreshold failures in a row. Readiness starts "not ready", liveness "alive";
liveness and readiness wait until a startup probe (if any) has passed. A liveness or
startup probe that reaches its failure threshold asks for the container to be killed.
httpGet and tcpSocket go to the pod IP; exec and grpc probes are not supported here and
always fail with a message saying so.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProbeSpec:
    kind: str  # "http" | "tcp" | "unsupported"
    port: int = 0
    path: str = "/"
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3
    error: str = ""  # why an unsupported probe fails


def _port(value: Any, container: Mapping[str, Any]) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    for p in container.get("ports") or []:
        if p.get("name") == value:
            return int(p["containerPort"])
    return None


def parse_probe(probe: Mapping[str, Any] | None, container: Mapping[str, Any]) -> ProbeSpec | None:
    if not probe:
        return None
    timing: dict[str, Any] = {
        "initial_delay": float(probe.get("initialDelaySeconds") or 0),
        "period": float(probe.get("periodSeconds") or 10),
        "timeout": float(probe.get("timeoutSeconds") or 1),
        "success_threshold": int(probe.get("successThreshold") or 1),
        "failure_threshold": int(probe.get("failureThreshold") or 3),
    }
    for key, kind in (("httpGet", "http"), ("tcpSocket", "tcp")):
        if key in probe:
            action = probe[key]
            port = _port(action.get("port"), container)
            if port is None:
                return ProbeSpec(
                    "unsupported", error=f"unknown port {action.get('port')!r}", **timing
                )
            headers = tuple(
                (str(h["name"]), str(h["value"])) for h in action.get("httpHeaders") or []
            )
            return ProbeSpec(
                kind,
                port,
                str(action.get("path") or "/"),
                str(action.get("scheme") or "HTTP"),
                headers,
                **timing,
            )
    which = next((k for k in ("exec", "grpc") if k in probe), "unknown")
    return ProbeSpec(
        "unsupported", error=f"{which} probes are not supported by the cascade node agent", **timing
    )


class ProbeTracker:
    """Consecutive-result counting for one probe."""

    def __init__(self, spec: ProbeSpec, initial: bool) -> None:
        self.spec = spec
        self.result = initial
        self.successes = 0
        self.failures = 0

    def record(self, ok: bool) -> bool:
        """Add one result; True when the probe's overall result flipped."""
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if not self.result and self.successes >= self.spec.success_threshold:
                self.result = True
                return True
        else:
            self.failures, self.successes = self.failures + 1, 0
            if self.result and self.failures >= self.spec.failure_threshold:
                self.result = False
                return True
        return False

    @property
    def exhausted(self) -> bool:
        """Failure threshold reached (fatal for liveness and startup probes)."""
        return self.failures >= self.spec.failure_threshold


def check(spec: ProbeSpec, ip: str) -> tuple[bool, str]:
    """Run one probe against the pod IP: (ok, message)."""
    if spec.kind == "unsupported":
        return False, spec.error
    try:
        if spec.kind == "tcp":
            with socket.create_connection((ip, spec.port), timeout=spec.timeout):
                return True, ""
        conn: http.client.HTTPConnection
        if spec.scheme.upper() == "HTTPS":
            ctx = ssl.create_default_context()
            ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
            conn = http.client.HTTPSConnection(ip, spec.port, timeout=spec.timeout, context=ctx)
        else:
            conn = http.client.HTTPConnection(ip, spec.port, timeout=spec.timeout)
        try:
            conn.request(
                "GET", spec.path, headers={"User-Agent": "kube-probe/1.20", **dict(spec.headers)}
            )
            status = conn.getresponse().status
        finally:
            conn.close()
        if 200 <= status < 400:
            return True, ""
        return False, f"HTTP probe failed with statuscode: {status}"
    except OSError as e:
        target = (
            f"{spec.scheme.lower()}://{ip}:{spec.port}{spec.path}"
            if spec.kind == "http"
            else f"{ip}:{spec.port}"
        )
        return False, f"{target}: {e}"


# (probe kind, message) callbacks into the pod worker.
OnEvent = Callable[[str, str], None]


class ContainerProbes:
    """The probe threads of one container run; `ready`/`started` are read by the worker."""

    def __init__(
        self,
        container: Mapping[str, Any],
        ip: str,
        on_change: Callable[[], None],
        on_fatal: OnEvent,
        on_failure: OnEvent,
    ) -> None:
        self._stop = threading.Event()
        self._started = threading.Event()
        self._ip, self._on_change, self._on_fatal, self._on_failure = (
            ip,
            on_change,
            on_fatal,
            on_failure,
        )
        specs = {
            k: parse_probe(container.get(f"{k}Probe"), container)
            for k in ("startup", "liveness", "readiness")
        }
        self.trackers: dict[str, ProbeTracker] = {
            k: ProbeTracker(s, initial=(k == "liveness")) for k, s in specs.items() if s is not None
        }
        if "startup" not in self.trackers:
            self._started.set()
        self._threads = [
            threading.Thread(target=self._loop, args=(k,), name=f"probe-{k}", daemon=True)
            for k in self.trackers
        ]
        for t in self._threads:
            t.start()

    @property
    def started(self) -> bool:
        return self._started.is_set()

    @property
    def ready(self) -> bool:
        r = self.trackers.get("readiness")
        return self.started and (r is None or r.result)

    def stop(self) -> None:
        self._stop.set()
        self._started.set()  # wake threads still waiting for the startup probe

    def _loop(self, kind: str) -> None:
        tracker = self.trackers[kind]
        if kind != "startup":
            self._started.wait()
        if self._stop.is_set() or self._stop.wait(tracker.spec.initial_delay):
            return
        while not self._stop.is_set():
            ok, msg = check(tracker.spec, self._ip)
            if self._stop.is_set():
                return
            flipped = tracker.record(ok)
            if not ok and tracker.failures == 1:
                self._on_failure(kind, msg)
            if kind == "startup" and tracker.result:
                self._started.set()
                self._on_change()
                return
            if kind != "readiness" and tracker.exhausted:
                self._on_fatal(kind, msg)
                return
            if flipped:
                self._on_change()
            self._stop.wait(tracker.spec.period)
