"""A bench run's own namespace: the CRDs (generated from `cascade_api`) applied, a fresh
namespace made, and a `cascade-operator` of the bench's own watching only it; the
operator stopped and the namespace deleted at exit. `bench capacity`, `bench autoscale`
and the benches that reuse the latter's cluster helpers (burst, coldstart) run in one."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from cascade_api.crd import model_deployment_crd, scale_plan_crd
from cascade_bench.operator_process import operator_process


class BenchNamespace(NamedTuple):
    """The kubernetes clients and the namespace's name."""

    core: Any  # CoreV1Api
    custom: Any  # CustomObjectsApi
    ns: str


def apply_crds(kubeconfig: Path) -> None:
    """Apply the ModelDeployment and ScalePlan CRDs and wait until they are Established."""
    docs = [model_deployment_crd(), scale_plan_crd()]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    subprocess.run(
        ["kubectl", "apply", "--validate=false", "-f", "-"],
        input=yaml.safe_dump_all(docs),
        text=True,
        env=env,
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["kubectl", "wait", "--for=condition=Established", "--timeout=60s",
         "crd/modeldeployments.cascade.dev", "crd/scaleplans.cascade.dev"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip


@contextmanager
def bench_namespace(
    kubeconfig: Path, prefix: str, say: Callable[[str], None] | None = None
) -> Iterator[BenchNamespace]:
    """A fresh namespace `PREFIX-xxxxxx` with its own operator; both removed at exit.
    `say` (if given) is told the namespace's name."""
    from kubernetes import client, config

    os.environ["KUBECONFIG"] = str(kubeconfig)  # the operator child inherits it
    config.load_kube_config(config_file=str(kubeconfig))
    apply_crds(kubeconfig)
    core, custom = client.CoreV1Api(), client.CustomObjectsApi()
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    if say is not None:
        say(f"namespace {ns}")
    try:
        with operator_process(ns, True):
            yield BenchNamespace(core, custom, ns)
    finally:
        core.delete_namespace(ns)
