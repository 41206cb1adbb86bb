"""The replay's trace flags turned into its `Scaling`, once for every command that has them.

`cascade bench replay` and `cascade simulate` take the same window, rate, token and class
flags so the same flags give the same requests; this is the one place they are read, and
`add_tokens` the one place their token flags are defined.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from cascade_protocol.cli_args import from_args

if TYPE_CHECKING:
    from cascade_bench.replay.scale import Scaling


def add_tokens(g: argparse._ArgumentGroup) -> None:
    """--context-scale, --output-scale, --max-prompt-tokens, --max-output-tokens."""
    g.add_argument("--context-scale", type=float, default=0.1, help="prompt = ContextTokens x S")
    g.add_argument("--output-scale", type=float, default=1.0, help="output = GeneratedTokens x S")
    g.add_argument("--max-prompt-tokens", type=int, default=512)
    g.add_argument("--max-output-tokens", type=int, default=256)


def scaling(args: argparse.Namespace) -> Scaling:
    """`Scaling` from the replay's flags, all named as its fields (imported lazily: the
    bench stack is heavy)."""
    from cascade_bench.replay.scale import Scaling

    return from_args(Scaling, args)
