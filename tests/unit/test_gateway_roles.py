"""Role-aware routing (Chiron §5), tick by tick on snapshots: own role, then mixed.

Interactive requests pack onto interactive backends, then mixed; batch requests fill
batch backends, then mixed backends' spare room (their batch, never the slack kept for
interactive arrivals); a class with no routable backend of its roles uses any.
"""

from __future__ import annotations

from dataclasses import replace

from cascade_gateway.policy import Waiter, assign
from cascade_gateway.router import BackendView, pick_backend, room
from cascade_protocol.generate import RequestClass
from cascade_protocol.load import LoadReport
from cascade_protocol.roles import InstanceRole

INTERACTIVE, BATCH = RequestClass.INTERACTIVE, RequestClass.BATCH
IN, M, B = InstanceRole.INTERACTIVE, InstanceRole.MIXED, InstanceRole.BATCH


def view(url: str, role: InstanceRole, in_flight: int = 0, **kw: object) -> BackendView:
    base: dict[str, object] = {"instance": url, "model": "m", "ready": True, "max_batch": 2}
    return BackendView(url, LoadReport.model_validate(base | kw), in_flight, role=role)


def waiters(*classes: RequestClass) -> list[Waiter]:
    return [Waiter(k, c) for k, c in enumerate(classes)]


def apply(views: list[BackendView], placed: list[tuple[int, str]]) -> list[BackendView]:
    """The next tick's snapshot: each placement is one more in flight."""
    counts = {v.url: v.in_flight for v in views}
    for _, url in placed:
        counts[url] += 1
    return [replace(v, in_flight=counts[v.url]) for v in views]


def test_room_by_role_and_class() -> None:
    slack = 2
    assert room(view("i", IN), INTERACTIVE, slack) == 4  # max_batch 2 + slack 2
    assert room(view("m", M), INTERACTIVE, slack) == 4
    assert room(view("b", B), BATCH, slack) == 4
    # Batch on a mixed backend: its batch only, the slack stays for interactive arrivals.
    assert room(view("m", M), BATCH, slack) == 2
    assert room(view("m", M, in_flight=2), BATCH, slack) == 0
    assert room(view("m", M, in_flight=2), INTERACTIVE, slack) == 2
    # An idle mixed backend always takes batch work, even at max_batch 1 and no slack.
    assert room(view("m", M, max_batch=1), BATCH, 0) == 1


def test_interactive_packs_onto_interactive_then_mixed_tick_by_tick() -> None:
    views = [view("mix", M), view("int-a", IN), view("int-b", IN), view("bat", B)]
    # Tick 1: three arrive. Least loaded among interactive backends, mixed untouched.
    placed = assign(waiters(INTERACTIVE, INTERACTIVE, INTERACTIVE), views, 0, slack=1)
    assert [url for _, url in placed] == ["int-a", "int-b", "int-a"]
    views = apply(views, placed)
    # Tick 2: two more. int-b's batch has a free slot; then the interactive batches are
    # full and mixed takes the burst before any slack slot is used.
    placed = assign(waiters(INTERACTIVE, INTERACTIVE), views, 0, slack=1)
    assert [url for _, url in placed] == ["int-b", "mix"]
    views = apply(views, placed)
    # Tick 3: mixed's last batch slot, then slack slots (interactive's first); the batch
    # backend never, while interactive and mixed ones are routable; the fifth waits.
    placed = assign(waiters(*[INTERACTIVE] * 5), views, 0, slack=1)
    assert [url for _, url in placed] == ["mix", "int-a", "int-b", "mix"]
    views = apply(views, placed)
    assert {v.url: v.in_flight for v in views} == {"mix": 3, "int-a": 3, "int-b": 3, "bat": 0}


def test_batch_fills_batch_backends_then_mixed_spare_room() -> None:
    views = [view("mix", M), view("int", IN), view("bat", B)]
    placed = assign(waiters(*[BATCH] * 7), views, 0, slack=1)
    # bat: 2 in its batch + 1 slack; then mixed up to its batch (2); never int.
    assert [url for _, url in placed] == ["bat", "bat", "mix", "mix", "bat"]
    views = apply(views, placed)
    # An interactive arrival still finds the mixed slack slot (the worker preempts a
    # batch sequence for it) and the interactive backend.
    placed = assign(waiters(INTERACTIVE, INTERACTIVE, BATCH), views, 0, slack=1)
    assert [url for _, url in placed] == ["int", "int"]
    views = apply(views, placed)
    placed = assign(waiters(INTERACTIVE, BATCH), views, 0, slack=1)
    assert placed == [(0, "int")]  # int's slack; batch still waits


def test_unlabelled_backends_are_mixed_and_serve_both() -> None:
    views = [view("a", M), view("b", M, in_flight=1)]
    assert pick_backend(views, 0, 2, request_class=INTERACTIVE) == "a"
    assert pick_backend(views, 0, 2, request_class=BATCH) == "a"
    views = [view("a", M, in_flight=2), view("b", M, in_flight=2)]
    assert pick_backend(views, 0, 2, request_class=BATCH) is None  # batch room is used up
    assert pick_backend(views, 0, 2, request_class=INTERACTIVE) == "a"


def test_fallback_when_no_backend_of_the_class_roles_is_routable() -> None:
    only_batch = [view("b1", B, in_flight=1), view("b2", B)]
    # No interactive or mixed backend: interactive uses batch backends (full room).
    assert pick_backend(only_batch, 0, 0, request_class=INTERACTIVE) == "b2"
    assert room(only_batch[0], INTERACTIVE, 0) == 1
    only_interactive = [view("i1", IN, in_flight=2), view("i2", IN, in_flight=1)]
    # No batch or mixed backend: batch gets the interactive backends' spare room.
    assert pick_backend(only_interactive, 0, 2, request_class=BATCH) == "i2"
    # An interactive backend that is not routable does not count: fall back.
    mixed_down = [view("i", IN, ready=False), view("b", B)]
    assert pick_backend(mixed_down, 0, 0, request_class=INTERACTIVE) == "b"
    # While one of the class's own roles is routable, there is no fallback (even full).
    full = [view("i", IN, in_flight=2), view("b", B)]
    assert pick_backend(full, 0, 0, request_class=INTERACTIVE) is None


def test_one_class_waiting_does_not_block_the_other() -> None:
    views = [view("int", IN, in_flight=2), view("bat", B)]
    placed = assign(waiters(INTERACTIVE, INTERACTIVE, BATCH, BATCH), views, 0, slack=0)
    assert placed == [(2, "bat"), (3, "bat")]


def test_retries_avoid_tried_backends_within_the_roles() -> None:
    views = [view("i1", IN), view("i2", IN), view("m", M)]
    tried = frozenset({"i1"})
    assert pick_backend(views, 0, 0, tried, INTERACTIVE) == "i2"
    tried = frozenset({"i1", "i2"})
    assert pick_backend(views, 0, 0, tried, INTERACTIVE) == "m"
    assert pick_backend(views, 0, 0, frozenset({"i1", "i2", "m"}), INTERACTIVE) == "i1"
