"""A worker's side of cooperative execution (BlitzScale 5.2) during a live scale-up.

The pair: a target heading a pipeline whose one stage is a source that holds the whole
model and serves its own requests (spec.liveScaling.cooperative; the planner pairs
them from the target's first block). Two things happen here, the rest is the
CooperativeExecutor's (pipeline/cooperative.py):

- the head grows: layers that land after it started are loaded (on a thread) and handed
  to the executor between two steps, so later batches can run more of them here;
- the source redirects: once the head serves (its micro-batches reach the source's
  stage), the first time the source has a queue it hands back (MIGRATE) every request
  that has not produced a token yet; the gateway sends them again, to the least loaded
  instance, which is the new head while the source is overloaded. New requests follow
  the same routing. Once, so a request the gateway sends back here is served here.
"""

from __future__ import annotations

import asyncio
import logging

from cascade_worker.serving.service import Serving

log = logging.getLogger(__name__)


def held_prefix(ranges: list[tuple[int, int]]) -> int:
    """One past the last layer of the held run that starts at layer 0 (0 if none)."""
    return next((end for start, end in ranges if start == 0), 0)


async def grow_head(serving: Serving) -> bool:
    """Give a cooperating head the layers that landed since it last grew; whether it
    grew."""
    from cascade_worker.engine.weights import load_stage_weights
    from cascade_worker.pipeline.cooperative import CooperativeExecutor

    head, engine, store = serving.head, serving.engine, serving.state.current_store()
    if head is None or engine is None or store is None:
        return False
    executor = head.executor
    if not isinstance(executor, CooperativeExecutor) or executor.error is not None:
        return False
    model = executor.head
    end = min(held_prefix(store.ready_layers()), model.config.num_layers)
    if end <= model.end:
        return False
    more = await asyncio.to_thread(
        load_stage_weights, store, model.config, model.end, end,
        device=model.device, dtype=model.dtype,
    )  # fmt: skip
    if more.start != model.end:  # something grew it meanwhile
        return False
    await engine.call(lambda core: executor.grow(more))
    log.info("cooperative head grew to layers [0, %d)", end)
    return True


def redirect_queued(serving: Serving) -> bool:
    """The source's queue moves to the head that serves (module docstring); the stage's
    status counts what moved. Whether it is done: something moved, or there is no engine
    left to move from."""
    engine = serving.engine
    if engine is None or engine.stopped:
        return True
    moved = engine.hand_back_queued("migrate: redirected to the cooperating new instance")
    if not moved:
        return False
    if serving.stage is not None:
        serving.stage.redirected += moved
    log.info("cooperative source: %d queued request(s) redirected", moved)
    return True
