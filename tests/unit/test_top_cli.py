"""`cascade top` as a command, with a fake reader: `--once` prints one frame, the flags'
errors, and the poller keeping the last data through a failed read."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

from cascade_cli import top
from cascade_cli.main import main
from cascade_cli.top_fetch import ReadError, gateway_ips
from cascade_cli.top_model import DeploymentView, Snapshot

NOW = datetime(2026, 11, 25, 12, 0, 30, tzinfo=UTC)


class FakeReader:
    """Answers `snapshots` in turn (an exception is raised), then the last one again."""

    instances: ClassVar[list[FakeReader]] = []

    def __init__(self, namespace: str, answers: list[Snapshot | Exception] | None = None) -> None:
        self.namespace = namespace
        self.answers = answers or [Snapshot(NOW, namespace, [DeploymentView(namespace, "llama")])]
        self.closed = False
        FakeReader.instances.append(self)

    def snapshot(self) -> Snapshot:
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> type[FakeReader]:
    FakeReader.instances = []
    monkeypatch.setattr(top, "Reader", FakeReader)
    monkeypatch.setattr(top, "load_kube_config", lambda: "ctx-ns")
    monkeypatch.setenv("COLUMNS", "100")
    return FakeReader


def test_once_prints_one_frame_of_the_namespace_given(
    fake: type[FakeReader], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["top", "--once", "-n", "demo"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cascade top   namespace demo   12:00:30")
    assert "\nllama " in out and "SCALEPLANS IN FLIGHT (0)   none" in out
    assert fake.instances[0].closed


def test_the_namespace_defaults_to_the_contexts_and_all_means_every_one(
    fake: type[FakeReader], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["top", "--once"]) == 0
    assert main(["top", "--once", "-A"]) == 0
    assert [r.namespace for r in fake.instances] == ["ctx-ns", ""]


def test_flag_errors(fake: type[FakeReader], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["top", "--interval", "0"]) == 1
    assert main(["top"]) == 1  # pytest's stdout is no terminal
    err = capsys.readouterr().err
    assert "--interval must be positive" in err and "use --once" in err
    with pytest.raises(SystemExit):
        main(["top", "-n", "x", "-A"])


def test_a_failed_read_fails_once(
    fake: type[FakeReader], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        top, "Reader", lambda ns: FakeReader(ns, [ReadError("API server: 403 Forbidden")])
    )
    assert main(["top", "--once"]) == 1
    assert "API server: 403 Forbidden" in capsys.readouterr().err


def test_the_poller_keeps_the_last_data_and_says_why_a_read_failed() -> None:
    good = Snapshot(NOW, "demo", [DeploymentView("demo", "llama")])
    reader = FakeReader("demo", [good, ReadError("API server unreachable: MaxRetryError")])
    poller = top.Poller(reader, 0.01)  # type: ignore[arg-type]
    poller.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (poller.latest and poller.latest.error):
        time.sleep(0.01)
    poller.stopped.set()
    poller.join(timeout=5)
    assert poller.latest is not None
    assert poller.latest.error == "API server unreachable: MaxRetryError"
    assert [d.name for d in poller.latest.deployments] == ["llama"]


def test_gateway_ips_are_the_running_gateway_pods_per_deployment() -> None:
    def pod(name: str, component: str, phase: str, ip: str | None) -> dict[str, Any]:
        labels = {"cascade.dev/deployment": "llama", "app.kubernetes.io/component": component}
        return {
            "metadata": {"name": name, "namespace": "demo", "labels": labels},
            "status": {"phase": phase, "podIP": ip},
        }

    pods = [
        pod("llama-gateway-a", "gateway", "Running", "10.0.0.5"),
        pod("llama-gateway-b", "gateway", "Pending", None),
        pod("llama-0", "worker", "Running", "10.0.0.6"),
    ]
    assert gateway_ips(pods) == {("demo", "llama"): ["10.0.0.5"]}
    assert gateway_ips(pods[1:]) == {("demo", "llama"): []}  # exists, not running yet
