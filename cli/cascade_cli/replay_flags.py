"""The replay's trace flags turned into its `Scaling`, once for every command that has them.

`cascade bench replay` and `cascade simulate` take the same window, rate, token and class
flags so the same flags give the same requests; this is the one place they are read.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cascade_bench.replay.scale import Scaling


def scaling(args: argparse.Namespace) -> Scaling:
    """`Scaling` from the replay's flags (imported lazily: the bench stack is heavy)."""
    from cascade_bench.replay.scale import Scaling

    return Scaling(
        start_s=args.start_s,
        duration_s=args.duration_s,
        speedup=args.speedup,
        max_requests=args.max_requests,
        context_scale=args.context_scale,
        output_scale=args.output_scale,
        max_prompt_tokens=args.max_prompt_tokens,
        max_output_tokens=args.max_output_tokens,
        batch_fraction=args.batch_fraction,
        seed=args.seed,
    )
