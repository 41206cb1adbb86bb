"""Whether a test tier runs, skips or fails, and how big its shared cluster is. Pure.

The integration tier needs the kube binaries (hack/build-kube.sh, cached outside the
repo) and etcd; the helm tier needs a helm 3 binary (hack/install-helm.sh). On a
developer's machine a tier without its tools skips, saying what is missing. Under CI
(`CI` set to anything but empty, 0, false or no, as CI services set it) the same tier
fails instead: a CI run that skipped the cluster tests would report green for code no
test ran. `cascade_dev.testing` reads the machine and carries the verdict out.

Tests that need N nodes say so (`@pytest.mark.nodes(N)`); the session's dev cluster is
brought up with the most any selected test needs, and never fewer than the session's
floor, so no such test meets a smaller cluster (tests/integration/conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

CI_OFF = frozenset({"", "0", "false", "no", "off"})

Action = Literal["run", "skip", "fail"]


def in_ci(env: Mapping[str, str]) -> bool:
    """`CI` is set to a true value (GitHub, GitLab and most CI services set CI=true)."""
    return env.get("CI", "").strip().lower() not in CI_OFF


@dataclass(frozen=True)
class Gate:
    action: Action
    message: str = ""  # empty when the tier runs


def gate(tier: str, missing: Sequence[str], ci: bool) -> Gate:
    """`missing`: one entry per absent tool, each naming it and how to get it."""
    if not missing:
        return Gate("run")
    what = "; ".join(missing)
    if ci:
        return Gate(
            "fail",
            f"CI=true: the {tier} tier cannot run, missing: {what} "
            "(CI fails instead of skipping it)",
        )
    return Gate("skip", f"{tier} tier skipped, missing: {what} (under CI=true this fails)")


def cluster_nodes(floor: int, needs: Iterable[int]) -> int:
    """Nodes for the session's cluster: the floor, or more when a test needs more."""
    wanted = list(needs)
    bad = [n for n in wanted if n < 1]
    if floor < 1 or bad:
        raise ValueError(f"node counts must be at least 1: floor {floor}, needs {bad}")
    return max([floor, *wanted])
