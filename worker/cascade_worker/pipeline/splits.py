"""Where a cooperating pair splits each new batch (BlitzScale 5.2), as layers arrive.

A target that is still loading runs the first T layers of a batch and its paired source
the rest. `SplitPolicy.next(held)` picks T for the next new batch: `zigzag` re-solves
the zigzag ILP (cascade_planner.zigzag.solve, exact) over the next HORIZON batches from
the layers held now and the measured load time (seconds to receive one layer over
seconds to compute one layer of a batch), and takes its first batch's T; `best_effort`
takes every layer held, up to half the model (the paper's baseline). Either is clamped
to [the source stage's first layer, layers held].

Colocated prefill and decode (the paper leaves it open): a request's split is fixed
when its prefill starts, because its KV cache of each layer lives where that layer ran;
its decode steps follow the same split, so a step mixes splits and runs as one
micro-batch per split (cooperative.py). Only new prefills are scheduled here, with
the unit weights of the paper's equal-size batches. Pure: no clocks of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from cascade_planner.zigzag import solve

HORIZON = 12  # batches the ILP looks ahead ("a dozen or so in practice")
Policy = Literal["zigzag", "best_effort"]


@dataclass
class SplitPolicy:
    num_layers: int
    min_split: int  # the source stage's first layer: the target runs at least up to it
    policy: Policy = "zigzag"
    load_time: float = 6.0  # one layer's load over one layer's compute (measured: observe)
    chosen: list[int] = field(default_factory=list)  # every split handed out, in order

    def next(self, held: int) -> int:
        """The number of layers the target runs for the next new batch."""
        held = max(self.min_split, min(held, self.num_layers))
        if self.policy == "best_effort":
            split = min(held, max(self.min_split, self.num_layers // 2))
        else:
            plan = solve(self.num_layers, HORIZON, self.load_time, loaded_at_start=held)
            split = max(self.min_split, min(plan.targets[0], held))
        self.chosen.append(split)
        return split

    def observe(self, layer_load_s: float, layer_compute_s: float) -> None:
        """Measured seconds per layer received and per layer computed (one batch)."""
        if layer_load_s > 0 and layer_compute_s > 0:
            self.load_time = layer_load_s / layer_compute_s
