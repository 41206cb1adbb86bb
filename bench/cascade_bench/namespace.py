"""A bench run's own namespace (cascade_dev.operator_process.own_namespace: the CRDs
applied, a fresh namespace, a `cascade-operator` watching only it, all gone at exit) and
the Kubernetes clients to work in it. `bench capacity`, `bench autoscale` and the benches
that reuse the latter's cluster helpers (burst, coldstart) run in one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from cascade_dev.operator_process import own_namespace


class BenchNamespace(NamedTuple):
    """The kubernetes clients and the namespace's name."""

    core: Any  # CoreV1Api
    custom: Any  # CustomObjectsApi
    ns: str


@contextmanager
def bench_namespace(
    kubeconfig: Path, prefix: str, say: Callable[[str], None] | None = None
) -> Iterator[BenchNamespace]:
    """A fresh namespace `PREFIX-xxxxxx` with its own operator; both removed at exit.
    `say` (if given) is told the namespace's name and where the operator logs."""
    from kubernetes import client, config

    os.environ["KUBECONFIG"] = str(kubeconfig)  # what the bench's own kubectl calls read
    config.load_kube_config(config_file=str(kubeconfig))
    _, log = tempfile.mkstemp(prefix=f"{prefix}-", suffix="-operator.log")
    with own_namespace(kubeconfig, prefix, Path(log)) as (ns, _):
        if say is not None:
            say(f"namespace {ns} (operator log {log})")
        yield BenchNamespace(client.CoreV1Api(), client.CustomObjectsApi(), ns)
