"""What crosses the socket between the node agent and the template (one datagram each).

The agent sends `Spawn` with the container's log file as an attached descriptor; the
template answers `Spawned` (the pid, or why not) and later `Exited` for every child it
reaped, with the exit code as kubelet reports it (128 + signal when killed).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class MountSpec:
    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class UserSpec:
    """Who the child becomes (nodeagent.identity): uid, gid, extra groups, no new privs."""

    uid: int
    gid: int
    groups: list[int] = field(default_factory=list)
    no_new_privs: bool = False


@dataclass(frozen=True)
class Spawn:
    """Start `argv` (argv[0]: a console script the template serves) as a container."""

    id: int
    argv: list[str]
    env: dict[str, str]
    cwd: str
    netns: str | None = None  # `ip netns` name to join; None: the template's own
    mounts: list[MountSpec] = field(default_factory=list)  # bind mounts in a private mount ns
    user: UserSpec | None = None  # None: stay root


@dataclass(frozen=True)
class Spawned:
    id: int
    pid: int | None
    error: str | None = None


@dataclass(frozen=True)
class Exited:
    pid: int
    exit_code: int


Message = Spawn | Spawned | Exited
_KINDS: dict[str, type[Spawn] | type[Spawned] | type[Exited]] = {
    "spawn": Spawn,
    "spawned": Spawned,
    "exited": Exited,
}


def encode(msg: Message) -> bytes:
    kind = next(k for k, t in _KINDS.items() if isinstance(msg, t))
    return json.dumps({"kind": kind, **asdict(msg)}).encode()


def decode(data: bytes) -> Message:
    """A message from its datagram; ValueError names what is wrong."""
    try:
        raw: dict[str, Any] = json.loads(data)
        kind = _KINDS[raw.pop("kind")]
        if kind is Spawn:
            raw["mounts"] = [MountSpec(**m) for m in raw.get("mounts") or []]
            raw["user"] = UserSpec(**raw["user"]) if raw.get("user") else None
        return kind(**raw)
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"bad template message {data[:200]!r}: {e}") from e


def exit_code(wait_status: int) -> int:
    """kubelet's exit code from a wait status: the code, or 128 + the killing signal."""
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code
