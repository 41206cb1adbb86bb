"""Transfer planning for multicast weight loading: pure functions, no I/O.

The operator calls `plan(PlanRequest, Topology) -> ScalePlanSpec` (planner.py) with a
`Topology` built from Node objects (`topology_from_nodes`, topology.py), or kept current
under node events by a `TopologyIndex` (topology_index.py); it raises
`PlanningError(reason, message)` (errors.py) when no plan can be made. Strategies:
BlitzScale chains (blitz.py: NVLink grouping, interference pruning, greedy multi-chains
by bandwidth and leaf), λScale's k-way binomial pipeline (kway.py over binomial.py,
hypercube.py, orders.py), and `auto`, which predicts both with the flow model (flow.py,
predict.py; binomial_time.py times a binomial plan without building it) and keeps the
faster. Execution pipelines that can form while blocks arrive
come from pipelines.py.

The lower-level builders stay public: `chain_plan` (balanced chains, leaf-aware),
`binomial_schedule`, `plan_spec` (either, wrapped into a spec with a one-rate estimate)
and `simulate` (replays a schedule and checks it). Nothing here imports ucx, kubernetes
or torch: the operator calls it inside a reconcile, the workers execute what it made.
"""

from cascade_planner.binomial import BinomialSchedule, SubGroup, binomial_schedule, step_bound
from cascade_planner.chains import chain_plan
from cascade_planner.errors import PlanningError, PlanningReason
from cascade_planner.orders import circular_shift_orders
from cascade_planner.planner import Candidate, PlanRequest, plan, plan_candidates
from cascade_planner.simulate import ScheduleViolation, simulate
from cascade_planner.spec import estimate_seconds, plan_spec
from cascade_planner.topology import FabricParams, NodeInfo, Topology, topology_from_nodes
from cascade_planner.topology_index import TopologyIndex

__all__ = [
    "BinomialSchedule",
    "Candidate",
    "FabricParams",
    "NodeInfo",
    "PlanRequest",
    "PlanningError",
    "PlanningReason",
    "ScheduleViolation",
    "SubGroup",
    "Topology",
    "TopologyIndex",
    "binomial_schedule",
    "chain_plan",
    "circular_shift_orders",
    "estimate_seconds",
    "plan",
    "plan_candidates",
    "plan_spec",
    "simulate",
    "step_bound",
    "topology_from_nodes",
]
