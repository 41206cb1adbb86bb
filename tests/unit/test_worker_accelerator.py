"""A worker's compute threads join the node's accelerator group (the dev cluster's
emulated GPU) by writing their thread ids where the node agent says; the engine thread
and a pipeline stage's forward thread do it when they start."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from serving_harness import FakeCore

from cascade_worker import accelerator
from cascade_worker.serving.async_engine import AsyncEngine


def test_without_the_variable_nothing_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CASCADE_ACCELERATOR_TASKS", raising=False)
    assert accelerator.enter() is False


def test_the_calling_thread_writes_its_own_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = tmp_path / "tasks"
    monkeypatch.setenv("CASCADE_ACCELERATOR_TASKS", str(tasks))
    seen: list[int] = []

    def run() -> None:
        assert accelerator.enter()
        seen.append(threading.get_native_id())

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert tasks.read_text() == f"{seen[0]}\n" and seen[0] != threading.get_native_id()


def test_a_group_it_cannot_write_leaves_the_thread_on_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CASCADE_ACCELERATOR_TASKS", str(tmp_path / "gone" / "tasks"))
    assert accelerator.enter() is False
    assert "stays off the accelerator group" in caplog.text


def test_the_engine_thread_enters_from_its_own_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's step loop runs under the quota; the event loop's thread does not."""
    calls: list[str] = []

    def enter() -> bool:
        calls.append(threading.current_thread().name)
        return True

    monkeypatch.setattr(accelerator, "enter", enter)

    async def go() -> None:
        engine = AsyncEngine(FakeCore())  # type: ignore[arg-type]
        await engine.start()
        await engine.stop()

    asyncio.run(go())
    assert calls == ["cascade-engine"]
