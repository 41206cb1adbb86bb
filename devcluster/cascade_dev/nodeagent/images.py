"""Container image -> local executable (pure).

There is no container runtime on the simulated nodes: an image "is present" when its
program exists on the host. Cascade's own images map, by the last path component of the
repository (registry, tag and digest stripped), to console scripts in the virtual
environment the agent runs from. Any other image runs only when the container names a
command found in that bin directory or on the host PATH (busybox `sleep 3600`); the
container otherwise waits with ErrImagePull and a message saying why.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cascade_api import constants as c

ERR_IMAGE_PULL = "ErrImagePull"


def image_name(image: str) -> str:
    """Last path component of the repository: "reg:5000/a/b:tag@sha256:..." -> "b"."""
    ref = image.split("@", 1)[0]
    last = ref.rsplit("/", 1)[-1]
    return last.split(":", 1)[0]


KNOWN_IMAGES: tuple[str, ...] = tuple(
    image_name(i) for i in (c.WORKER_IMAGE, c.GATEWAY_IMAGE, c.OPERATOR_IMAGE)
)


@dataclass(frozen=True)
class Resolved:
    """What to exec: argv[0] is an absolute path."""

    argv: list[str]
    image_id: str


@dataclass(frozen=True)
class Unavailable:
    """The image cannot run here; reason/message go into the waiting state."""

    reason: str
    message: str


Which = Callable[[str], str | None]


def find_program(
    name: str, bin_dir: str, which: Which, is_exec: Callable[[str], bool]
) -> str | None:
    """Resolve a command: absolute path as is, else the venv bin dir, then PATH."""
    if os.path.isabs(name):
        return name if is_exec(name) else None
    if "/" in name:
        return None
    candidate = os.path.join(bin_dir, name)
    if is_exec(candidate):
        return candidate
    return which(name)


def resolve(
    image: str,
    command: Sequence[str] | None,
    args: Sequence[str] | None,
    *,
    bin_dir: str,
    which: Which,
    is_exec: Callable[[str], bool],
) -> Resolved | Unavailable:
    """Map a container's image/command/args to an argv, as a runtime would.

    `command` replaces the image's entrypoint and `args` are appended. For a known image
    without command the entrypoint is its console script. For an unknown image the
    command (or, without one, the first arg, as for images like busybox that have no
    entrypoint) must resolve on the host.
    """
    cmd = list(command or [])
    rest = list(args or [])
    name = image_name(image)
    known = name in KNOWN_IMAGES
    if not cmd:
        if known:
            script = os.path.join(bin_dir, name)
            if not is_exec(script):
                return Unavailable(
                    ERR_IMAGE_PULL,
                    f'image "{image}" maps to {script}, which is not installed '
                    "(pip install -e . in the venv the node agent runs from)",
                )
            return Resolved([script, *rest], f"cascade://{name}")
        cmd, rest = rest, []
    if cmd:
        prog = find_program(cmd[0], bin_dir, which, is_exec)
        if prog is not None:
            image_id = f"cascade://{name}" if known else f"cascade-host://{prog}"
            return Resolved([prog, *cmd[1:], *rest], image_id)
    wanted = f" (command {cmd[0]!r} not found on the host)" if cmd else ""
    return Unavailable(
        ERR_IMAGE_PULL,
        f'image "{image}" is not available on simulated nodes{wanted}: known images are '
        f"{', '.join(KNOWN_IMAGES)} (any registry, tag or digest); other images run only "
        "with a command found in the venv bin dir or on the host PATH",
    )
