"""A sender's binomial sends, in the plan's step order.

The schedule is valid step by step: a node sends one block per step, and a block it
forwards in step s arrived in an earlier step. Executed asynchronously (no barrier), the
plan finishes no later than its synchronous version *if every node sends in step order*:
by induction each transfer can start no later than its step would. Serving requests in
arrival order instead lets a later step's send (whose receiver happened to ask first)
delay an earlier one that others wait on, and the delays compound.

So a planned send waits for this node's earlier planned sends. An earlier send is
skipped, not waited for, when its receiver is gone (its data connection to us dropped)
or has not asked within `skip_after_s` (it got the block elsewhere, or died before it
ever connected). Requests that are not in the plan (fallback fetches) are not ordered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


class StepOrder:
    def __init__(self, outgoing: Iterable[tuple[int, str, int]], skip_after_s: float) -> None:
        self.plan = sorted(outgoing)  # (step, receiver, block)
        self._index = {(step, rx): i for i, (step, rx, _) in enumerate(self.plan)}
        self.resolved = [False] * len(self.plan)
        self.skipped: list[int] = []  # steps skipped because their receiver never came
        self.gone: set[str] = set()
        self.skip_after_s = skip_after_s
        self._head_since: dict[int, float] = {}  # position -> when a send first waited on it
        self._changed = asyncio.Event()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _head(self, before: int) -> int | None:
        """First unresolved planned send before position `before`."""
        for j in range(before):
            if not self.resolved[j]:
                if self.plan[j][1] in self.gone:
                    self.resolved[j] = True
                    continue
                return j
        return None

    async def turn(self, step: int, receiver: str) -> None:
        """Wait until every earlier planned send is done or skipped."""
        i = self._index.get((step, receiver))
        if i is None:
            return
        loop = asyncio.get_running_loop()
        while (j := self._head(i)) is not None:
            since = self._head_since.setdefault(j, loop.time())
            left = since + self.skip_after_s - loop.time()
            if left <= 0:
                step_j, rx_j, _ = self.plan[j]
                log.warning("planned step %d to %s never requested; skipping it", step_j, rx_j)
                self.resolved[j] = True
                self.skipped.append(step_j)
                self._notify()
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    def finished(self, step: int, receiver: str) -> None:
        i = self._index.get((step, receiver))
        if i is not None and not self.resolved[i]:
            self.resolved[i] = True
            self._notify()

    def receiver_gone(self, receiver: str) -> None:
        if receiver not in self.gone:
            self.gone.add(receiver)
            self._notify()
