"""A receiver's whole transfer: follow the plan, survive failures, say what is missing.

Chain (BlitzScale): pull every wanted block, in chain order and cut-through, from the
nearest live upstream. When that upstream dies (connection reset, stall) the receiver
re-attaches to the next one up the chain (it knows the chain order from the plan) and
asks only for the blocks it still misses; its own downstream keeps pulling from it
throughout. A block that fails its checksum is asked for again, verified-only (the
sender sends it once it is installed), up to `max_attempts` times per upstream before
the receiver tries the next upstream for it. A block an upstream declares unavailable
is asked of the next upstream.

Binomial (λScale): execute this node's incoming transfers in step order, each a
verified single-block fetch tagged with its step; when the planned sender fails, the
block comes from the fallbacks (the sources, own sub-group's first).

Both end with a repair pass over the fallbacks for anything still missing, and stop at
the deadline: whatever is not installed by then is reported as missing.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from cascade_worker.multicast.fetch import Fetcher, FetchOutcome
from cascade_worker.multicast.roles import Role

log = logging.getLogger(__name__)


@dataclass
class ReceiveState:
    dead: list[str] = field(default_factory=list)  # peers abandoned, in order
    lacks: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    attempts: Counter[tuple[str, int]] = field(default_factory=Counter)


class Receiver:
    def __init__(self, role: Role, fetcher: Fetcher, *, max_attempts: int, deadline: float):
        self.role = role
        self.fetcher = fetcher
        self.store = fetcher.store
        self.max_attempts = max_attempts
        self.deadline = deadline  # time.monotonic() by which to stop
        self.state = ReceiveState()

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _pending(self) -> list[int]:
        return [b for b in self.role.wanted if not self.store.has(b)]

    def _note(self, peer: str, out: FetchOutcome) -> None:
        st = self.state
        for b in out.corrupt:
            st.attempts[(peer, b)] += 1
            if st.attempts[(peer, b)] >= self.max_attempts:
                st.lacks[peer].add(b)
        st.lacks[peer].update(out.unavailable)
        if out.failed and peer not in st.dead:
            st.dead.append(peer)

    async def run(self) -> None:
        if self.role.upstreams:
            await self._chain()
        else:
            await self._binomial()
        await self._repair()

    async def _chain(self) -> None:
        st = self.state
        while self._left() > 0:
            pending = self._pending()
            pick = next(
                (
                    (up, [b for b in pending if b not in st.lacks[up]])
                    for up in self.role.upstreams
                    if up not in st.dead and any(b not in st.lacks[up] for b in pending)
                ),
                None,
            )
            if not pending or pick is None:
                return
            up, blocks = pick
            retry = [b for b in blocks if st.attempts[(up, b)] > 0]
            out = await self.fetcher.fetch(
                up, retry or blocks, cut_through=not retry, timeout_s=self._left()
            )
            self._note(up, out)

    async def _binomial(self) -> None:
        for step, sender, block in self.role.incoming:
            if self._left() <= 0:
                return
            if not self.store.has(block):
                await self._get(block, [sender, *self.role.fallbacks], step)

    async def _repair(self) -> None:
        for block in self._pending():
            if self._left() <= 0:
                return
            await self._get(block, self.role.fallbacks, None)

    async def _get(self, block: int, candidates: list[str], step: int | None) -> bool:
        st = self.state
        for peer in dict.fromkeys(candidates):
            while peer not in st.dead and block not in st.lacks[peer] and self._left() > 0:
                out = await self.fetcher.fetch(
                    peer,
                    [block],
                    cut_through=False,
                    step=step if peer == candidates[0] else None,
                    timeout_s=self._left(),
                )
                self._note(peer, out)
                if out.installed:
                    return True
        return self.store.has(block)
