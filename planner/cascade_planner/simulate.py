"""Replay a step schedule and check the rules every binomial plan must obey.

Rules: in each step a node sends at most one block and receives at most one; a block is
sent only by a node that already held it before the step began (a block received in
step s can be forwarded from step s+1 on); a node never sends to itself. The replay
returns what every node holds at the end and the step at which each node got each
block, so tests can assert "every target ends with every block" and planners can
measure how soon the first complete copies appear.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cascade_api.scaleplan import Step


class ScheduleViolation(ValueError):
    """The schedule breaks one of the module's rules; the message says where."""


@dataclass
class Replay:
    holdings: dict[str, set[int]]
    # node -> block -> step index in which it arrived
    arrivals: dict[str, dict[int, int]] = field(default_factory=dict)

    def complete(self, nodes: Iterable[str], num_blocks: int) -> bool:
        return all(len(self.holdings.get(n, set())) == num_blocks for n in nodes)


def simulate(
    steps: Sequence[Step],
    initial: Mapping[str, Iterable[int]],
    *,
    allow_duplicates: bool = False,
) -> Replay:
    """Replay `steps` from `initial` holdings; ScheduleViolation on the first broken rule."""
    holdings = {node: set(blocks) for node, blocks in initial.items()}
    arrivals: dict[str, dict[int, int]] = {}
    for index, step in enumerate(steps):
        senders: set[str] = set()
        receivers: set[str] = set()
        landed: list[tuple[str, int]] = []
        for tr in step.transfers:
            if tr.sender == tr.receiver:
                raise ScheduleViolation(f"step {index}: {tr.sender} sends to itself")
            if tr.sender in senders:
                raise ScheduleViolation(f"step {index}: {tr.sender} sends twice")
            if tr.receiver in receivers:
                raise ScheduleViolation(f"step {index}: {tr.receiver} receives twice")
            if tr.block not in holdings.get(tr.sender, set()):
                raise ScheduleViolation(
                    f"step {index}: {tr.sender} sends block {tr.block} it does not hold"
                )
            if not allow_duplicates and tr.block in holdings.get(tr.receiver, set()):
                raise ScheduleViolation(
                    f"step {index}: {tr.receiver} already holds block {tr.block}"
                )
            senders.add(tr.sender)
            receivers.add(tr.receiver)
            landed.append((tr.receiver, tr.block))
        for node, block in landed:
            if block not in holdings.setdefault(node, set()):
                arrivals.setdefault(node, {})[block] = index
            holdings[node].add(block)
    return Replay(holdings=holdings, arrivals=arrivals)
