"""Shared helpers of the pipeline tests: reference tokens, in-process stage servers on a
loop thread, stage processes started through the module's CLI."""

from __future__ import annotations

import contextlib
import itertools
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from engine_harness import PROMPTS, drain, greedy, request, token_ids

from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.weights import load_stage_weights
from cascade_worker.pipeline.executor import PipelineExecutor
from cascade_worker.pipeline.head import head_engine
from cascade_worker.pipeline.loop import shared_loop
from cascade_worker.pipeline.server import StageServer

LAYERS = 4
NEW_TOKENS = 20
# Small enough that the longest prompt is prefilled in chunks, mixed with decodes.
ENGINE = {"max_batch": 8, "max_model_len": 128, "prefill_budget": 12}
PROMPT_IDS = [[5, 9, 14, 200, 17, 3, 8, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 7]]


def add_requests(engine: LLMEngine, max_tokens: int = NEW_TOKENS) -> list[str]:
    """The same mix of prompts (text of several lengths and raw ids) to any engine."""
    prompts: list[str | list[int]] = [*PROMPTS, *PROMPT_IDS]
    ids = []
    for i, prompt in enumerate(prompts):
        engine.add_request(request(f"q{i}", prompt, greedy(max_tokens)))
        ids.append(f"q{i}")
    return ids


def run_to_end(engine: LLMEngine) -> dict[str, list[int]]:
    add_requests(engine)
    return {rid: token_ids(chunks) for rid, chunks in drain(engine).items()}


def reference_tokens(store: BlockStore) -> dict[str, list[int]]:
    """What one process (the whole model as one stage) generates."""
    return run_to_end(LLMEngine.from_store(store, kv_cache_tokens=1024, **ENGINE))


def ranges(cuts: Sequence[int]) -> list[tuple[int, int]]:
    return list(itertools.pairwise([0, *cuts, LAYERS]))


@contextlib.contextmanager
def stage_servers(
    store: BlockStore, layer_ranges: Sequence[tuple[int, int]]
) -> Iterator[list[StageServer]]:
    """Stage servers in this process over UCX loopback, on the process's pipeline loop
    (the heads' executors use it too: UCX requests complete by polling on every loop
    that uses them, so one loop leaves the two cores to the model)."""
    config = ModelConfig.from_hf(store.manifest.config)
    loop = shared_loop()
    servers: list[StageServer] = []
    try:
        for a, b in layer_ranges:
            weights = load_stage_weights(store, config, a, b)
            servers.append(loop.run(StageServer(config, weights).start(), timeout=30))
        yield servers
    finally:
        for server in servers:
            loop.run(server.close(), timeout=30)


@contextlib.contextmanager
def pipeline(
    store: BlockStore, cuts: Sequence[int], **kwargs: object
) -> Iterator[tuple[LLMEngine, PipelineExecutor]]:
    """A head engine over in-process stages for the layer ranges after the first cut."""
    parts = ranges(cuts)
    with stage_servers(store, parts[1:]) as servers:
        engine, executor = head_engine(
            store,
            parts[0][1],
            [s.address for s in servers],
            kv_cache_tokens=1024,
            min_micro_batch_tokens=1,  # cut even decode steps: exercise micro-batching
            **ENGINE,  # type: ignore[arg-type]
            **kwargs,  # type: ignore[arg-type]
        )
        try:
            yield engine, executor
        finally:
            executor.close()


def start_stage_processes(
    model_dir: Path, layer_ranges: Sequence[tuple[int, int]], timeout: float = 60
) -> list[tuple[subprocess.Popen[str], str]]:
    """`python -m cascade_worker.pipeline.stage_process` per range, started together, each on a
    free port; (process, address) of each once it printed READY."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cascade_worker.pipeline.stage_process",
                "--model-dir",
                str(model_dir),
                "--layers",
                f"{a}:{b}",
                "--listen",
                "127.0.0.1:0",
                "--threads",
                "1",
                "--log-level",
                "WARNING",
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )
        for a, b in layer_ranges
    ]
    give_up = time.monotonic() + timeout
    try:
        return [(proc, _ready_address(proc, give_up)) for proc in procs]
    except BaseException:
        for proc in procs:
            proc.kill()
        raise


def _ready_address(proc: subprocess.Popen[str], give_up: float) -> str:
    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < give_up:
            if sel.select(timeout=0.5):
                line = proc.stdout.readline()
                if line.startswith("READY "):
                    return line.split()[1]
                if not line:
                    break
    raise AssertionError(f"{proc.args} did not start (exit {proc.poll()})")


def stop(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
