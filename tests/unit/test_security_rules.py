"""The Pod Security Standards checker refuses a bad pod for every control it knows.

A pod that passes `restricted` is broken one field at a time; each break must be named
by the control it violates, so the checks that pass the operator's pods can fail.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from security_rules import RESTRICTED, added_capabilities, violations

Pod = dict[str, Any]


def good_pod() -> Pod:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ok"},
        "spec": {
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 10001,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "main",
                    "image": "x",
                    "ports": [{"containerPort": 8080}],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
    }


def _container(pod: Pod) -> Pod:
    c: Pod = pod["spec"]["containers"][0]
    return c


def _ctx(pod: Pod) -> Pod:
    ctx: Pod = _container(pod)["securityContext"]
    return ctx


def _set(path: str, value: Any) -> Callable[[Pod], None]:
    """A mutation that sets spec.<path> (dotted) to `value`."""

    def mutate(pod: Pod) -> None:
        node = pod["spec"]
        *parents, last = path.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return mutate


def _container_ctx(key: str, value: Any) -> Callable[[Pod], None]:
    def mutate(pod: Pod) -> None:
        _ctx(pod)[key] = value

    return mutate


def _add_volume(volume: Pod) -> Callable[[Pod], None]:
    def mutate(pod: Pod) -> None:
        pod["spec"]["volumes"].append(volume)

    return mutate


def _annotate(key: str, value: str) -> Callable[[Pod], None]:
    def mutate(pod: Pod) -> None:
        pod["metadata"]["annotations"] = {key: value}

    return mutate


def _no_drop(pod: Pod) -> None:
    _ctx(pod)["capabilities"] = {}


def _host_port(pod: Pod) -> None:
    _container(pod)["ports"][0]["hostPort"] = 8080


def _init_container_escalates(pod: Pod) -> None:
    init = copy.deepcopy(_container(pod))
    init["name"] = "init"
    del init["securityContext"]["allowPrivilegeEscalation"]
    pod["spec"]["initContainers"] = [init]


def _root_container(pod: Pod) -> None:
    del pod["spec"]["securityContext"]["runAsNonRoot"]


def _no_seccomp(pod: Pod) -> None:
    del pod["spec"]["securityContext"]["seccompProfile"]


BAD: list[tuple[str, Callable[[Pod], None], str]] = [
    ("host-process", _set("securityContext.windowsOptions.hostProcess", True), "hostProcess"),
    ("host-network", _set("hostNetwork", True), "host namespaces"),
    ("host-pid", _set("hostPID", True), "host namespaces"),
    ("host-ipc", _set("hostIPC", True), "host namespaces"),
    ("privileged", _container_ctx("privileged", True), "privileged"),
    (
        "cap-not-baseline",
        _container_ctx("capabilities", {"drop": ["ALL"], "add": ["SYS_ADMIN"]}),
        "capabilities",
    ),
    (
        "cap-baseline-not-restricted",
        _container_ctx("capabilities", {"drop": ["ALL"], "add": ["CHOWN"]}),
        "capabilities",
    ),
    ("cap-no-drop-all", _no_drop, "capabilities"),
    ("host-path", _add_volume({"name": "h", "hostPath": {"path": "/"}}), "hostPath volumes"),
    ("host-port", _host_port, "host ports"),
    (
        "apparmor-field",
        _container_ctx("appArmorProfile", {"type": "Unconfined"}),
        "AppArmor",
    ),
    (
        "apparmor-annotation",
        _annotate("container.apparmor.security.beta.kubernetes.io/main", "unconfined"),
        "AppArmor",
    ),
    ("selinux-type", _container_ctx("seLinuxOptions", {"type": "spc_t"}), "SELinux"),
    ("selinux-user", _set("securityContext.seLinuxOptions", {"user": "root"}), "SELinux"),
    ("proc-mount", _container_ctx("procMount", "Unmasked"), "/proc mount type"),
    (
        "seccomp-unconfined",
        _container_ctx("seccompProfile", {"type": "Unconfined"}),
        "seccomp",
    ),
    ("seccomp-missing", _no_seccomp, "seccomp"),
    (
        "sysctl-unsafe",
        _set("securityContext.sysctls", [{"name": "kernel.msgmax", "value": "1"}]),
        "sysctls",
    ),
    ("volume-nfs", _add_volume({"name": "n", "nfs": {"server": "s", "path": "/"}}), "volume types"),
    (
        "escalation-allowed",
        _container_ctx("allowPrivilegeEscalation", True),
        "privilege escalation",
    ),
    ("escalation-unset-in-init", _init_container_escalates, "privilege escalation"),
    ("non-root-unset", _root_container, "running as non-root"),
    ("non-root-false", _container_ctx("runAsNonRoot", False), "running as non-root"),
    ("root-user-pod", _set("securityContext.runAsUser", 0), "running as non-root user"),
    ("root-user-container", _container_ctx("runAsUser", 0), "running as non-root user"),
]


def test_the_good_pod_passes() -> None:
    assert violations(good_pod()) == []


@pytest.mark.parametrize(("mutate", "control"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_each_control_refuses_its_bad_pod(mutate: Callable[[Pod], None], control: str) -> None:
    pod = good_pod()
    mutate(pod)
    found = violations(pod)
    assert found, "the bad pod passed"
    assert any(v.startswith(control) for v in found), found  # hostPath also fails volume types


def test_every_rule_has_a_bad_pod() -> None:
    controls = {b[2] for b in BAD}
    named = {
        "hostProcess",
        "host namespaces",
        "privileged",
        "capabilities",
        "hostPath volumes",
        "host ports",
        "AppArmor",
        "SELinux",
        "/proc mount type",
        "seccomp",
        "sysctls",
        "volume types",
        "privilege escalation",
        "running as non-root",
        "running as non-root user",
    }
    assert controls == named
    assert len(RESTRICTED) == 17  # baseline's 11 checks and restricted's 6


def test_an_allowed_capability_is_tolerated_and_still_reported() -> None:
    pod = good_pod()
    _ctx(pod)["capabilities"] = {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    assert violations(pod) and violations(pod, allow_add={"IPC_LOCK"}) == []
    assert added_capabilities(pod) == ["IPC_LOCK"]


def test_workload_templates_are_checked() -> None:
    pod = good_pod()
    pod["spec"]["hostNetwork"] = True
    deployment = {"kind": "Deployment", "spec": {"template": pod}}
    job = {"kind": "Job", "spec": {"template": pod}}
    assert violations(deployment) == violations(job) == ["host namespaces: hostNetwork is true"]
