"""Multicast executor: run a ScalePlan's chains or binomial steps on one node.

See runner.py (one node's life), coordinator.py/follower.py (common start and end),
serve.py and fetch.py (the two ends of a block transfer), order.py (binomial step
order), receive.py (plans, re-attachment, repair) and node.py (the process entry point
the benchmark launches). Names below load lazily, so importing a pure submodule (roles,
order) does not pull in torch and ucxx.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cascade_worker.multicast.result import NodeResult
    from cascade_worker.multicast.roles import Role, role_for
    from cascade_worker.multicast.runner import MulticastNode, NodeOptions

_EXPORTS = {
    "MulticastNode": "cascade_worker.multicast.runner",
    "NodeOptions": "cascade_worker.multicast.runner",
    "NodeResult": "cascade_worker.multicast.result",
    "Role": "cascade_worker.multicast.roles",
    "role_for": "cascade_worker.multicast.roles",
}

__all__ = ["MulticastNode", "NodeOptions", "NodeResult", "Role", "role_for"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
