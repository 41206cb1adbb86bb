"""A namespace with a `cascade-operator` of its own: what every integration test module
and every cluster bench (`bench capacity`, `bench autoscale`, `bench scaleup
--run-operator`) runs its ModelDeployments in, so runs that share a cluster never see
each other's pods. The CRDs are generated from `cascade_api` and applied first."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from cascade_api.crd import model_deployment_crd, scale_plan_crd

CRDS = ("crd/modeldeployments.cascade.dev", "crd/scaleplans.cascade.dev")


class OperatorProcess:
    """A `cascade-operator` watching one namespace (None: all), as a process its owner
    may kill and start again; its output goes to `log`."""

    def __init__(
        self,
        kubeconfig: Path | None,
        namespace: str | None,
        log: Path,
        metrics_port: int = 0,
        model_roots: str | None = None,
    ) -> None:
        self.namespace, self.log = namespace, log
        self.metrics_port = metrics_port  # 0: no /metrics (operators of tests share the host)
        self.env = kube_env(kubeconfig)
        if model_roots is not None:
            self.env["CASCADE_MODEL_ROOTS"] = model_roots
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = Path(sys.executable).with_name("cascade-operator")
        argv = [str(exe), "--liveness-port", "0", "--metrics-port", str(self.metrics_port)]
        if self.namespace:
            argv += ["--namespace", self.namespace]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        """SIGKILL: no handler runs, whatever it was doing is cut short."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def kube_env(kubeconfig: Path | None) -> dict[str, str]:
    """This process's environment, pointed at `kubeconfig` if given."""
    return dict(os.environ) | ({"KUBECONFIG": str(kubeconfig)} if kubeconfig else {})


def _kubectl(env: dict[str, str], *args: str, stdin: str | None = None) -> None:
    done = subprocess.run(
        ["kubectl", *args], input=stdin, env=env, text=True, capture_output=True, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args[:2])} failed: {done.stderr.strip()}")


def apply_crds(env: dict[str, str]) -> None:
    """Apply the ModelDeployment and ScalePlan CRDs and wait until they are Established."""
    docs = yaml.safe_dump_all([model_deployment_crd(), scale_plan_crd()])
    _kubectl(env, "apply", "--validate=false", "-f", "-", stdin=docs)
    _kubectl(env, "wait", "--for=condition=Established", "--timeout=60s", *CRDS)


@contextmanager
def own_namespace(
    kubeconfig: Path | None,
    prefix: str,
    log: Path,
    metrics_port: int = 0,
    model_roots: str | None = None,
) -> Iterator[tuple[str, OperatorProcess]]:
    """A fresh namespace `PREFIX-xxxxxx` and a started operator watching only it; at exit
    its ModelDeployments, the namespace (neither waited for) and the operator go."""
    env = kube_env(kubeconfig)
    apply_crds(env)
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    _kubectl(env, "create", "namespace", ns)
    operator = OperatorProcess(kubeconfig, ns, log, metrics_port, model_roots)
    operator.start()
    try:
        yield ns, operator
    finally:
        for what in (("md", "--all", "-n", ns), ("namespace", ns)):
            subprocess.run(
                ["kubectl", "delete", *what, "--wait=false"], env=env, capture_output=True
            )
        operator.stop()
