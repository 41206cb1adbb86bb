"""Transfer planning for multicast weight loading: pure functions, no I/O.

`chain_plan` builds BlitzScale-style serial-forwarding chains, `binomial_schedule`
builds λScale's binomial pipeline (hypercube steps, k-way circular-shift block orders),
`plan_spec` wraps either into a ScalePlan spec, and `simulate` replays a schedule to
check it. Nothing here imports ucx, kubernetes or torch: the operator calls it inside a
reconcile, the workers only execute what it produced.
"""

from cascade_planner.binomial import BinomialSchedule, SubGroup, binomial_schedule, step_bound
from cascade_planner.chains import chain_plan
from cascade_planner.orders import circular_shift_orders
from cascade_planner.simulate import ScheduleViolation, simulate
from cascade_planner.spec import estimate_seconds, plan_spec

__all__ = [
    "BinomialSchedule",
    "ScheduleViolation",
    "SubGroup",
    "binomial_schedule",
    "chain_plan",
    "circular_shift_orders",
    "estimate_seconds",
    "plan_spec",
    "simulate",
    "step_bound",
]
