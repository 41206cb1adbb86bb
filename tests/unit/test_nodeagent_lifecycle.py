"""Restart policy, crash back-off and grace periods of the node agent."""

from __future__ import annotations

import pytest

from cascade_dev.nodeagent import lifecycle


def test_backoff_doubles_from_10s_to_300s() -> None:
    delays = []
    step = 0
    for _ in range(8):
        delay, step = lifecycle.next_backoff(step, ran_for_s=1.0)
        delays.append(delay)
    assert delays == [10, 20, 40, 80, 160, 300, 300, 300]


def test_backoff_resets_after_long_run() -> None:
    _, step = lifecycle.next_backoff(5, ran_for_s=1.0)
    assert step == 6
    delay, step = lifecycle.next_backoff(step, ran_for_s=601.0)
    assert (delay, step) == (10, 1)


def test_backoff_huge_step_is_capped() -> None:
    assert lifecycle.backoff_delay(10_000) == 300


@pytest.mark.parametrize(
    ("policy", "code", "init", "restart"),
    [
        ("Always", 0, False, True),
        ("Always", 1, False, True),
        ("OnFailure", 0, False, False),
        ("OnFailure", 137, False, True),
        ("Never", 1, False, False),
        ("Always", 0, True, False),
        ("Always", 1, True, True),
        ("OnFailure", 1, True, True),
        ("Never", 1, True, False),
    ],
)
def test_should_restart(policy: str, code: int, init: bool, restart: bool) -> None:
    assert lifecycle.should_restart(policy, code, init=init) is restart


def test_restart_policy_default() -> None:
    assert lifecycle.restart_policy({"spec": {}}) == "Always"
    assert lifecycle.restart_policy({"spec": {"restartPolicy": "Never"}}) == "Never"


def test_grace_period() -> None:
    assert lifecycle.grace_period(None) == 30
    assert lifecycle.grace_period({"spec": {"terminationGracePeriodSeconds": 5}}) == 5
    assert lifecycle.grace_period({"spec": {"terminationGracePeriodSeconds": 600}}) == 30
    deleting = {
        "metadata": {"deletionGracePeriodSeconds": 0},
        "spec": {"terminationGracePeriodSeconds": 20},
    }
    assert lifecycle.grace_period(deleting) == 0
