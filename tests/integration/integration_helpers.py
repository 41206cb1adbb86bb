"""Helpers shared by the integration tests (not fixtures: those live in conftest.py)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from cascade_dev.operator_process import OperatorProcess, own_namespace
from cascade_dev.testing import DevCluster, wait_for
from cascade_protocol.peer_auth import SECRET_KEY, TokensByHost, secret_name

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# The model every example manifest names (examples/*/modeldeployment.yaml); `make demo`
# makes it the same way. Workers load it at start, so pods are Ready only if it exists.
EXAMPLE_MODEL = Path("/var/lib/cascade/models/tiny-llama")


def ensure_example_model() -> None:
    subprocess.run(
        [str(BIN / "cascade"), "model", "init", str(EXAMPLE_MODEL), "--if-missing"],
        check=True,
        capture_output=True,
        timeout=300,
    )


# Pod IP -> its deployment's peer token, learnt whenever a Namespace lists pods: a test
# calls a worker as the operator and gateway do, with the token (cascade_protocol.peer_auth).
_TOKENS = TokensByHost()


def auth_headers(url: str) -> dict[str, str]:
    """The bearer header a worker at `url` wants ({} for a pod not listed yet)."""
    return _TOKENS.headers_for(url)


def http(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    """One JSON request (with the pod's token); (status, decoded body) for errors too."""
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json", **auth_headers(url)}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


# Where tests make checkpoints of their own: pods run as their securityContext's user
# (10001), which cannot reach pytest's tmp_path (below a 0700 /tmp/pytest-of-<user>).
TEST_MODELS = Path(tempfile.gettempdir()) / "cascade-test-models"


def scratch_model_dir(name: str) -> Path:
    """A fresh directory below TEST_MODELS, for a test's checkpoint (or a non-model)."""
    TEST_MODELS.mkdir(mode=0o755, exist_ok=True)
    out = TEST_MODELS / f"{name}-{uuid.uuid4().hex[:8]}"
    out.mkdir(mode=0o755)
    return out


def small_model(name: str = "tiny") -> Path:
    """A 4-layer x 64-hidden checkpoint of a test's own (`cascade model init`)."""
    out = scratch_model_dir(name)
    subprocess.run(
        [str(BIN / "cascade"), "model", "init", str(out), "--layers", "4", "--hidden", "64"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def generated(url: str, body: dict[str, Any]) -> list[int]:
    """Token ids of one worker /v1/generate stream (NDJSON chunks)."""
    headers = {"Content-Type": "application/json", **auth_headers(url)}
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=120) as resp:
        chunks = [json.loads(line) for line in resp.read().splitlines() if line.strip()]
    assert chunks[-1]["finish_reason"] == "length", chunks[-1]
    return [t for c in chunks for t in c["token_ids"]]


def container_pid(pod: dict[str, Any]) -> int:
    """The host pid of a dev-cluster pod's first container (its id is cascade://<pid>)."""
    container_id = pod["status"]["containerStatuses"][0]["containerID"]
    return int(container_id.removeprefix("cascade://"))


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (a pod's container may be a wrapper and its child)."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        for task in Path(f"/proc/{p}/task").glob("*"):
            with open(task / "children") as f:
                todo += [int(c) for c in f.read().split()]
    return found


def proc_status(pid: int) -> dict[str, str]:
    """/proc/<pid>/status as fields (Uid, Gid, Groups, CapEff, NoNewPrivs, ...)."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def pod_ready(pod: dict[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    conds = pod["status"].get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


class Namespace:
    """One test namespace on the local cluster, and the pods of its ModelDeployments."""

    def __init__(self, dev: DevCluster, name: str) -> None:
        self.dev = dev
        self.ns = name
        self.operator: OperatorProcess | None = None  # set by namespace_with_operator

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return self.dev.kubectl("-n", self.ns, *args, stdin=stdin, check=check).stdout

    def worker_pods(self, md: str) -> list[dict[str, Any]]:
        return self._pods(md, "worker")

    def host_copies(self, md: str) -> list[dict[str, Any]]:
        """The deployment's live host-copy pods, by name."""
        return self._pods(md, "host-copy")

    def gateway_pods(self, md: str) -> list[dict[str, Any]]:
        """The deployment's live gateway pods."""
        return self._pods(md, "gateway")

    def _pods(self, md: str, component: str) -> list[dict[str, Any]]:
        selector = f"cascade.dev/deployment={md},app.kubernetes.io/component={component}"
        pods = json.loads(self.kubectl("get", "pods", "-l", selector, "-o", "json"))["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        token = self.peer_token(md) if live else None
        if token:
            _TOKENS.authorize([pod["status"].get("podIP") for pod in live], token)
        return sorted(live, key=lambda p: p["metadata"]["name"])

    def peer_token(self, md: str) -> str | None:
        """The deployment's peer token, from the Secret the operator made (None: none yet)."""
        out = self.kubectl("get", "secret", secret_name(md), "-o", "json", check=False)
        data = (json.loads(out).get("data") or {}) if out.strip() else {}
        raw = data.get(SECRET_KEY)
        return base64.b64decode(raw).decode() if raw else None

    def ready_pods(self, md: str) -> list[dict[str, Any]]:
        return [p for p in self.worker_pods(md) if p["status"].get("podIP") and pod_ready(p)]

    def md_status(self, md: str) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", "md", md, "-o", "json")).get("status") or {})

    def apply(self, manifest: dict[str, Any], *flags: str) -> None:
        """kubectl apply one manifest in this namespace (`flags`: e.g. --validate=false)."""
        self.kubectl("apply", *flags, "-f", "-", stdin=yaml.safe_dump(manifest))

    def apply_model(self, name: str, replicas: int, model: Path = EXAMPLE_MODEL) -> None:
        """kubectl apply a ModelDeployment of the checkpoint at `model` (file:// URI)."""
        self.apply(model_deployment(name, replicas, model=model))

    def serve_model(
        self, name: str, replicas: int, model: Path = EXAMPLE_MODEL, timeout: float = 240
    ) -> None:
        """`apply_model`, then wait until its `replicas` instances are Ready."""
        self.apply_model(name, replicas, model)
        self.wait_ready(name, replicas, timeout)

    def wait_ready(self, md: str, n: int, timeout: float = 240, what: str = "") -> None:
        """Wait until `md` has exactly `n` Ready worker pods; fail naming `what`."""
        what = what or f"{n} instance{'s' if n != 1 else ''} of {md} Ready"
        wait_for(what, lambda: len(self.ready_pods(md)) == n, timeout=timeout)

    def available(self, md: str) -> bool:
        doc = json.loads(self.kubectl("get", "md", md, "-o", "json"))
        conditions = (doc.get("status") or {}).get("conditions", [])
        return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def model_deployment(
    name: str, replicas: int, model: Path = EXAMPLE_MODEL, **spec: Any
) -> dict[str, Any]:
    """A ModelDeployment manifest serving the checkpoint at `model`; `spec` adds fields.
    No host copies unless `spec` asks (hostCopies): the tests that do not test the host
    pool (test_host_copies.py) count plans and pods among instances."""
    return {
        "apiVersion": "cascade.dev/v1alpha1",
        "kind": "ModelDeployment",
        "metadata": {"name": name},
        "spec": {"model": {"uri": f"file://{model}"}, "replicas": replicas, "hostCopies": 0} | spec,
    }


# The directories the tests' operators let `file://` models name: the example model's
# and the tests' own (small_model's checkpoints).
MODEL_ROOTS = f"{EXAMPLE_MODEL.parent},{TEST_MODELS}"


def operator_process(
    dev: DevCluster, namespace: str | None, log: Path, metrics_port: int = 0
) -> OperatorProcess:
    """A `cascade-operator` of the test's own on `dev`, letting pods read the test models."""
    return OperatorProcess(dev.kubeconfig, namespace, log, metrics_port, MODEL_ROOTS)


@contextmanager
def namespace_with_operator(
    dev: DevCluster, prefix: str, log_dir: Path, metrics_port: int = 0
) -> Iterator[Namespace]:
    """A fresh namespace watched by its own `cascade-operator` process (`ns.operator`,
    /metrics on the host's `metrics_port` unless 0); both go at exit."""
    log = log_dir / "operator.log"
    with own_namespace(dev.kubeconfig, prefix, log, metrics_port, MODEL_ROOTS) as (name, op):
        ns = Namespace(dev, name)
        ns.operator = op
        yield ns


@contextmanager
def real_model_served(
    dev: DevCluster, md: str, replicas: int, log_dir: Path, timeout: float = 400
) -> Iterator[tuple[Namespace, str]]:
    """The real model (SmolLM2, tests/real_model.py) as ModelDeployment `md` with
    `replicas` Ready instances, in a namespace of its own: (namespace, gateway URL)."""
    from real_model import ensure_real_model

    model = ensure_real_model()
    with namespace_with_operator(dev, f"cascade-{md}", log_dir) as ns:
        manifest = model_deployment(md, replicas, model=model)
        ns.apply(manifest, "--validate=false")
        ns.wait_ready(md, replicas, timeout)
        yield ns, dev.url(f"{ns.ns}/{md}-gateway")


@contextmanager
def helm_release(
    dev: DevCluster, release: str = "cascade", namespace: str = "cascade-system"
) -> Iterator[str]:
    """The chart installed (`helm upgrade --install --wait`) as `release`; uninstalled at
    exit, once its operator pod is gone. Yields the helm binary (skips without one, or
    under CI=true fails)."""
    from cascade_dev.testing import helm_binary, wait_for

    helm = helm_binary()

    def run(*args: str) -> None:
        done = subprocess.run(
            [helm, *args], env=dev.env, capture_output=True, text=True, timeout=400
        )  # fmt: skip
        assert done.returncode == 0, f"helm {' '.join(args)} failed: {done.stderr}"

    chart = str(ROOT / "charts/cascade")
    run("upgrade", "--install", release, chart, "-n", namespace, "--create-namespace",
        "--wait", "--timeout", "5m")  # fmt: skip
    try:
        yield helm
    finally:
        run("uninstall", release, "-n", namespace)  # helm 3.6: no --wait for uninstall

        def gone() -> bool:
            pods = dev.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout
            return not json.loads(pods)["items"]

        wait_for("the operator pod to go", gone, timeout=60)


def complete(url: str, model: str, max_tokens: int = 3, timeout: float = 30) -> bool:
    """One completion through a gateway at `url`: True when it answered with a choice."""
    body = {"model": model, "prompt": "Hello", "max_tokens": max_tokens}
    req = urllib.request.Request(
        f"{url}/v1/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status == 200 and bool(json.loads(resp.read())["choices"])
    except OSError:
        return False


def worker_statuses(ns: Namespace, md: str) -> dict[str, dict[str, Any]]:
    """Each of `md`'s workers' GET /v1/status by pod name; pods without an address yet,
    or not answering, are left out (a scale-up's pods come and go)."""
    from cascade_api.constants import WORKER_PORT

    out = {}
    for pod in ns.worker_pods(md):
        ip = pod["status"].get("podIP")
        if not ip:
            continue
        try:
            code, doc = http("GET", f"http://{ip}:{WORKER_PORT}/v1/status")
        except OSError:
            continue
        if code == 200:
            out[pod["metadata"]["name"]] = doc
    return out
