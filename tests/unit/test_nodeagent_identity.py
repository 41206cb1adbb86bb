"""Who the dev cluster's containers run as (nodeagent.identity): the securityContext as a
kubelet and runtime apply it, then setpriv for an exec'd container and the template's
`become` for a forked one."""

from __future__ import annotations

from typing import Any

import pytest
from operator_fixtures import md

from cascade_api import constants as c
from cascade_dev.nodeagent.identity import Identity, IdentityError, identity
from cascade_dev.nodeagent.runner import Mount, build_argv
from cascade_dev.template.messages import Spawn, UserSpec, decode, encode
from cascade_operator import builders
from cascade_operator.config import OperatorConfig
from cascade_operator.observed import MdRef


def pod(
    sc: dict[str, Any] | None = None, **container: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = {"name": "c", "image": "python:3", **container}
    return {"spec": {"securityContext": sc or {}, "containers": [spec]}}, spec


def test_cascades_own_pods_run_as_10001_with_no_capabilities() -> None:
    built = builders.worker_pod(MdRef("llama", "ns", "u"), md(), 0, OperatorConfig())
    [container] = built["spec"]["containers"]
    who = identity(built, container)
    assert who == Identity(c.POD_USER, c.POD_USER, (c.POD_USER,), (), no_new_privs=True)
    assert who.forkable
    assert who.setpriv_argv() == [
        "setpriv", "--reuid=10001", "--regid=10001", "--groups=10001",
        "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs",
    ]  # fmt: skip


def test_the_container_overrides_the_pod_and_images_bring_their_user() -> None:
    p, spec = pod({"runAsUser": 5, "runAsGroup": 6, "supplementalGroups": [7]},
                  securityContext={"runAsUser": 8})  # fmt: skip
    assert identity(p, spec) == Identity(8, 6, (7,))
    p, spec = pod(image=c.WORKER_IMAGE)  # no securityContext: the image's USER
    assert identity(p, spec) == Identity(c.POD_USER, c.POD_USER)
    p, spec = pod()  # another image, nothing asked: root, as before
    assert identity(p, spec) is None


def test_run_as_non_root_refuses_a_root_user() -> None:
    p, spec = pod({"runAsNonRoot": True})
    with pytest.raises(IdentityError, match="runAsNonRoot and image will run as root"):
        identity(p, spec)


def test_added_capabilities_are_kept_and_then_the_template_cannot_fork_it() -> None:
    caps = {"capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}
    p, spec = pod({"runAsUser": 10001}, securityContext=caps)
    who = identity(p, spec)
    assert who is not None and who.caps == ("IPC_LOCK",) and not who.forkable
    argv = who.setpriv_argv()
    assert "--inh-caps=-all,+ipc_lock" in argv and "--ambient-caps=+ipc_lock" in argv


def test_setpriv_runs_after_the_mounts_which_need_root() -> None:
    become = Identity(10001, 10001).setpriv_argv()
    argv = build_argv(["/bin/prog"], ["ip", "netns", "exec", "n"], [Mount("/a", "/b")],
                      can_mount=True, become=become)  # fmt: skip
    assert argv[:4] == ["ip", "netns", "exec", "n"]
    assert argv[argv.index("cascade-mounts") + 1 :] == [*become, "/bin/prog"]
    assert build_argv(["/bin/prog"], [], [], can_mount=True, become=become) == [
        *become,
        "/bin/prog",
    ]


def test_the_template_is_told_the_user() -> None:
    spawn = Spawn(1, ["cascade-worker"], {}, "/", user=UserSpec(10001, 10001, [10001], True))
    assert decode(encode(spawn)) == spawn
    assert decode(encode(Spawn(2, ["x"], {}, "/"))).user is None
