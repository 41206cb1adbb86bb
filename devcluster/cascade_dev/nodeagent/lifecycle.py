"""Restart policy and crash back-off (pure), as kubelet applies them.

A container that exits is restarted according to the pod's restartPolicy (init
containers only when they failed). Consecutive restarts wait 10 s, 20 s, 40 s ... up to
300 s (the container shows CrashLoopBackOff meanwhile); a container that ran for 10
minutes before exiting starts again from the shortest delay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BACKOFF_INITIAL_S = 10.0
BACKOFF_MAX_S = 300.0
BACKOFF_RESET_AFTER_S = 600.0
MAX_GRACE_S = 30.0
DEFAULT_GRACE_S = 30.0

CRASH_LOOP = "CrashLoopBackOff"


def restart_policy(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("restartPolicy") or "Always")


def should_restart(policy: str, exit_code: int, *, init: bool) -> bool:
    """Whether an exited container runs again.

    Init containers that succeeded are done; failed ones retry unless policy is Never.
    """
    if init:
        return exit_code != 0 and policy != "Never"
    if policy == "Always":
        return True
    if policy == "OnFailure":
        return exit_code != 0
    return False


def backoff_delay(step: int) -> float:
    """Delay before the restart that follows `step` earlier back-offs (0-based)."""
    return min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * (2.0 ** max(0, min(step, 16))))


def next_backoff(step: int, ran_for_s: float) -> tuple[float, int]:
    """(delay before restarting, step to store) after an exit of a container that ran
    `ran_for_s` seconds; a long healthy run resets the back-off."""
    if ran_for_s >= BACKOFF_RESET_AFTER_S:
        step = 0
    return backoff_delay(step), step + 1


def grace_period(pod: Mapping[str, Any] | None) -> float:
    """Seconds between SIGTERM and SIGKILL: the deletion's grace, else the spec's, <= 30 s."""
    if not pod:
        return DEFAULT_GRACE_S
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    for v in (meta.get("deletionGracePeriodSeconds"), spec.get("terminationGracePeriodSeconds")):
        if v is not None:
            return max(0.0, min(MAX_GRACE_S, float(v)))
    return DEFAULT_GRACE_S
