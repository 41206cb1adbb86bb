"""Command-line flags every Cascade pod process shares, and the argparse types behind them.

The worker and the gateway listen the same way (--port, --host defaulting to $POD_IP,
--drain-seconds) and validate numbers and on/off words the same way, so a flag or an
environment variable means one thing in every pod. `from_args` builds a config dataclass
from the flags named like its fields (the `cascade` commands' configs). Pure: argparse
and dataclasses only, no I/O.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    D = TypeVar("D", bound=DataclassInstance)

DEFAULT_DRAIN_SECONDS = 2.0
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


def bind_host(env: Mapping[str, str]) -> str:
    """Pods bind to their own IP when the node agent/kubelet tells them; else everywhere."""
    return env.get("POD_IP") or "0.0.0.0"


def parse_port(value: str) -> int:
    """argparse type for a TCP port; 0 means "any free port" (tests)."""
    try:
        port = int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a port number: {value!r}") from exc
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {port}")
    return port


def parse_seconds(value: str) -> float:
    """argparse type for a non-negative duration in seconds."""
    try:
        seconds = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from exc
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {seconds}")
    return seconds


def parse_positive_seconds(value: str) -> float:
    """argparse type for a period or timeout: seconds, more than zero."""
    seconds = parse_seconds(value)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {seconds}")
    return seconds


def parse_mbit(value: str) -> float:
    """argparse type for a rate in Mbit/s: a number more than 0."""
    try:
        mbit = float(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a rate in Mbit/s: {value!r}") from exc
    if not mbit > 0 or mbit == float("inf"):
        raise argparse.ArgumentTypeError(f"must be more than 0 Mbit/s: {value}")
    return mbit


def int_at_least(minimum: int, what: str) -> Callable[[str], int]:
    """argparse type for a whole number >= `minimum` (`what` names it in errors)."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not a {what}: {value!r}") from exc
        if number < minimum:
            raise argparse.ArgumentTypeError(f"{what} must be at least {minimum}: {number}")
        return number

    return parse


def parse_flag(value: str) -> bool:
    """An on/off environment variable; a typo is an error, not silently "off"."""
    word = value.strip().lower()
    if word in TRUE_WORDS | FALSE_WORDS:
        return word in TRUE_WORDS
    raise argparse.ArgumentTypeError(f"not on/off: {value!r}")


def add_serving_args(
    parser: argparse.ArgumentParser, env: Mapping[str, str], *, port_env: str, default_port: int
) -> None:
    """--port/--host/--drain-seconds, shared by every Cascade pod process."""
    parser.add_argument(
        "--port",
        type=parse_port,
        default=env.get(port_env, str(default_port)),
        help=f"listen port (env {port_env}, default {default_port})",
    )
    parser.add_argument(
        "--host",
        default=bind_host(env),
        help="listen address (default: $POD_IP, else 0.0.0.0)",
    )
    parser.add_argument(
        "--drain-seconds",
        type=parse_seconds,
        default=env.get("CASCADE_DRAIN_SECONDS", str(DEFAULT_DRAIN_SECONDS)),
        help="grace between SIGTERM (readiness 503) and exit "
        f"(env CASCADE_DRAIN_SECONDS, default {DEFAULT_DRAIN_SECONDS})",
    )


def from_args(cls: type[D], args: argparse.Namespace, /, **given: Any) -> D:
    """`cls` (a dataclass) from parsed flags: each of its fields from the flag whose `dest`
    is the field's name, where `args` has one (else the field's default); `given` holds
    the fields whose flag is named otherwise or whose value is computed, and wins over
    a flag of the same name. A name in `given` that is no field is a TypeError."""
    taken = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)
        if f.init and hasattr(args, f.name)
    }
    return cls(**(taken | given))
