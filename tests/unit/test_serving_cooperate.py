"""A cooperating source's redirect, as its status reports it (serving/cooperate.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from cascade_worker.serving.cooperate import held_prefix, redirect_queued
from cascade_worker.serving.pipeline import StageRole


class Engine:
    stopped = False

    def __init__(self, queued: int) -> None:
        self.queued = queued

    def hand_back_queued(self, why: str) -> int:
        moved, self.queued = self.queued, 0
        return moved


def test_the_stage_status_counts_the_requests_the_source_redirected() -> None:
    stage = StageRole(layers=(2, 4))
    serving = SimpleNamespace(engine=Engine(queued=3), stage=stage)
    assert redirect_queued(cast(Any, serving)) is True  # done: the queue moved
    assert stage.describe().model_dump(by_alias=True)["redirected"] == 3


def test_a_source_with_no_queue_when_the_head_serves_redirects_when_it_has_one() -> None:
    engine = Engine(queued=0)
    stage = StageRole(layers=(2, 4))
    serving = cast(Any, SimpleNamespace(engine=engine, stage=stage))
    assert redirect_queued(serving) is False  # nothing to move yet: ask again next batch
    engine.queued = 2
    assert redirect_queued(serving) is True
    assert (stage.redirected, engine.queued) == (2, 0)


def test_a_stopped_engine_redirects_nothing() -> None:
    engine = Engine(queued=2)
    engine.stopped = True
    stage = StageRole(layers=(2, 4))
    assert redirect_queued(cast(Any, SimpleNamespace(engine=engine, stage=stage))) is True
    assert (stage.redirected, engine.queued) == (0, 2)


def test_the_held_prefix_is_the_run_from_layer_zero() -> None:
    assert held_prefix([(0, 3), (5, 7)]) == 3
    assert held_prefix([(1, 3)]) == 0
