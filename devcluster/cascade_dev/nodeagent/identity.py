"""Who a container's process runs as: its securityContext, as a kubelet and runtime apply it.

The container's fields override the pod's: `runAsUser` and `runAsGroup` (without one,
what the image declares: Cascade's images are `USER 10001:10001`, others root), the
pod's `fsGroup` and `supplementalGroups` as extra groups, `runAsNonRoot` refusing an
identity that resolves to root (kubelet's CreateContainerConfigError), capabilities
(every one dropped when `drop` names ALL, then `add` kept), and no new privileges unless
`allowPrivilegeEscalation` allows them. A process that runs as root with every
capability needs no change (None). `setpriv_argv` is the exec'd container's prefix
(util-linux setpriv, run after the mount wrapper, which needs root); a child forked from
the worker template takes the same identity itself (template.namespaces.become), where
no capability is kept (`forkable`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cascade_api.constants import POD_USER

from . import images


class IdentityError(ValueError):
    """The securityContext cannot be satisfied (runAsNonRoot and a root user)."""


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    caps: tuple[str, ...] | None = None  # kept capabilities (None: all, as root has)
    no_new_privs: bool = False

    @property
    def forkable(self) -> bool:
        """A forked root child can become this by setuid alone: a user that keeps no
        capability (dropping root's uid clears them all)."""
        return self.uid != 0 and not self.caps

    def setpriv_argv(self) -> list[str]:
        argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}"]
        groups = ",".join(map(str, self.groups))
        argv.append(f"--groups={groups}" if groups else "--clear-groups")
        if self.caps is not None:
            kept = "".join(f",+{c.lower()}" for c in self.caps)
            argv += [f"--inh-caps=-all{kept}", f"--bounding-set=-all{kept}"]
            if self.caps and self.uid != 0:
                argv.append(f"--ambient-caps={kept.lstrip(',')}")
        if self.no_new_privs:
            argv.append("--no-new-privs")
        return argv


def _image_user(image: str) -> tuple[int, int]:
    return (POD_USER, POD_USER) if images.image_name(image) in images.KNOWN_IMAGES else (0, 0)


def identity(pod: Mapping[str, Any], container: Mapping[str, Any]) -> Identity | None:
    """The identity `container` of `pod` runs as; None: the agent's own (root, all caps)."""
    pod_sc = (pod.get("spec") or {}).get("securityContext") or {}
    sc = {**pod_sc, **(container.get("securityContext") or {})}
    image_uid, image_gid = _image_user(str(container.get("image") or ""))
    uid = int(sc["runAsUser"]) if sc.get("runAsUser") is not None else image_uid
    gid = int(sc["runAsGroup"]) if sc.get("runAsGroup") is not None else image_gid
    if sc.get("runAsNonRoot") and uid == 0:
        raise IdentityError("container has runAsNonRoot and image will run as root")
    groups = [int(g) for g in pod_sc.get("supplementalGroups") or []]
    if pod_sc.get("fsGroup") is not None:
        groups.insert(0, int(pod_sc["fsGroup"]))
    caps_spec = sc.get("capabilities") or {}
    dropped_all = "ALL" in (caps_spec.get("drop") or [])
    caps = tuple(sorted(str(c) for c in caps_spec.get("add") or [])) if dropped_all else None
    no_new_privs = sc.get("allowPrivilegeEscalation") is False
    found = Identity(uid, gid, tuple(dict.fromkeys(groups)), caps, no_new_privs)
    return None if found == Identity(0, 0) else found
