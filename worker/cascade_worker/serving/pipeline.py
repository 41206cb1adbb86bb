"""A worker's parts in execution pipelines: a stage server, or the head's executor.

A worker that holds the blocks of layers [a, b) (the whole model, or only part of it
while it still receives the rest) can serve them to a pipeline as a `StageRole`: a
`StageServer` (pipeline/server.py) on the pipeline port. A worker that holds [0, a) can
be the pipeline's head: its engine (scheduler, tokenizer, sampling) runs those layers
and a `PipelineExecutor` the rest on the stages; `HeadRole` is that executor as the
serving layer sees it. Once the head holds the whole model it leaves the pipeline
(`local_stage`, then `PipelineExecutor.switch_to_local` on the engine thread).

Every UCX connection of the worker lives on its main (aiohttp) loop (pipeline/loop.py):
the stage server is started there, and the head's executor borrows it. Heavy modules
(torch, ucxx) load on first use, as the rest of the worker's control API does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cascade_protocol.status import PipelineInfo, StageInfo
from cascade_worker.control.errors import RequestError
from cascade_worker.engine.options import EngineOptions, torch_dtype
from cascade_worker.engine.scheduler import DEFAULT_MAX_BATCH

if TYPE_CHECKING:
    from cascade_worker.blocks.store import BlockStore
    from cascade_worker.engine.engine import LLMEngine
    from cascade_worker.engine.stage import StageModel
    from cascade_worker.pipeline.executor import PipelineExecutor
    from cascade_worker.pipeline.head import PreparedHead
    from cascade_worker.pipeline.server import StageServer
    from cascade_worker.pipeline.splits import SplitPolicy
    from cascade_worker.transport.shared import SharedServer

# A head's batch bound when neither the request nor the worker's flags give one: the
# default of LLMEngine.from_store, which builds the one-process engine.


def check_blocks(store: BlockStore, start: int, end: int) -> None:
    """RequestError(409) naming the blocks `store` lacks to run layers [start, end)."""
    from cascade_worker.engine.config import ModelConfig
    from cascade_worker.engine.weights import store_tensors

    config = ModelConfig.from_hf(store.manifest.config)
    try:
        store_tensors(store, config, start, end)  # zero-copy views of the blocks it needs
    except ValueError as exc:
        raise RequestError(409, f"cannot run layers [{start}, {end}): {exc}") from exc


@dataclass
class StageRole:
    """This worker as a pipeline stage; `server` is None while it starts."""

    layers: tuple[int, int]
    server: StageServer | None = None
    covered_at: float | None = None  # live scale-ups: when its layers' blocks were held
    redirected: int = 0  # a cooperating source: requests handed to the pair's head

    def describe(self) -> StageInfo:
        address = self.server.address if self.server is not None else None
        return StageInfo(
            layers=self.layers, address=address, covered_at=self.covered_at,
            redirected=self.redirected,
        )  # fmt: skip


def pipeline_listener(host: str, port: int) -> SharedServer[Any]:
    """The pipeline port this worker's stage roles borrow in turn (transport/shared.py)."""
    from cascade_protocol.peer_auth import PIPELINE
    from cascade_worker.access.refusals import count
    from cascade_worker.pipeline.frames import CODEC
    from cascade_worker.transport.shared import SharedServer

    return SharedServer(
        CODEC, host, port, name="pipeline", on_refused=lambda why: count(PIPELINE, why)
    )


async def start_stage_server(
    store: BlockStore, role: StageRole, options: EngineOptions, listener: SharedServer[Any]
) -> StageServer:
    """Load the stage's weights (on a thread: a device copy) and listen on `listener`
    (this loop's)."""
    from cascade_worker.engine.config import ModelConfig
    from cascade_worker.engine.weights import load_stage_weights
    from cascade_worker.pipeline.server import StageServer

    config = ModelConfig.from_hf(store.manifest.config)
    start, end = role.layers
    device = options.device or "cpu"
    dtype = torch_dtype(options.dtype)
    weights = await asyncio.to_thread(
        load_stage_weights, store, config, start, end, device=device, dtype=dtype
    )
    server = StageServer(config, weights, listener=listener, device=device)
    return await server.start()


@dataclass
class HeadRole:
    """The pipeline behind a head's engine, as status and readiness see it."""

    executor: PipelineExecutor
    stages: list[str]  # addresses, in layer order
    switching: bool = False  # a switch to local execution is under way
    left: bool = False  # closed by this worker (drain, switch): not a failure
    covered_at: float | None = None  # live scale-ups: see PipelineInfo
    serving_at: float | None = None

    def broken(self) -> str | None:
        """Why the pipeline cannot run (a stage died, refused, timed out); None while it
        works or once this worker left it on purpose."""
        error = self.executor.error
        return None if self.left or error is None else f"pipeline broken: {error}"

    def close(self) -> None:
        """Detach from the stages (blocking: from a thread, not from the loop)."""
        self.left = True
        self.executor.close()

    def describe(self) -> PipelineInfo:
        return PipelineInfo(
            # [0, a): what the head computes itself (a cooperating head grows)
            stages=list(self.stages), local_layers=(0, self.executor.head.end),
            covered_at=self.covered_at, serving_at=self.serving_at,
        )  # fmt: skip


def prepare_head(
    hf_config: dict[str, Any],
    options: EngineOptions,
    end: int,
    stages: list[str],
    loop: asyncio.AbstractEventLoop,
    cooperative: bool = False,
) -> PreparedHead:
    """What a head over layers [0, end) and `stages` needs besides its weights (a KV
    cache, the stages attached). Blocking, through `loop`: call on a thread."""
    from cascade_worker.pipeline.head import prepare_head as prepare

    return prepare(
        hf_config, end, stages,
        max_batch=options.max_batch or DEFAULT_MAX_BATCH, max_model_len=options.max_model_len,
        device=options.device or "cpu", dtype=torch_dtype(options.dtype), loop=loop,
        cooperative=cooperative,
    )  # fmt: skip


def build_head(
    store: BlockStore,
    options: EngineOptions,
    end: int,
    stages: list[str],
    loop: asyncio.AbstractEventLoop,
    prepared: PreparedHead | None = None,
    splits: SplitPolicy | None = None,
) -> tuple[LLMEngine, HeadRole]:
    """An engine over layers [0, end) here and `stages` for the rest, over `prepared`
    (prepare_head) if given. Blocking (it may attach every stage through `loop`): call
    on a thread, never on `loop`."""
    from cascade_worker.engine.scheduler import DEFAULT_PREFILL_BUDGET
    from cascade_worker.pipeline.head import head_engine

    # Context and KV cache are sized by head_engine as for a one-process engine.
    engine, executor = head_engine(
        store, end, stages,
        max_batch=options.max_batch or DEFAULT_MAX_BATCH,
        max_model_len=options.max_model_len,
        prefill_budget=options.prefill_budget or DEFAULT_PREFILL_BUDGET,
        device=options.device or "cpu", dtype=torch_dtype(options.dtype), loop=loop,
        prepared=prepared, splits=splits,
    )  # fmt: skip
    return engine, HeadRole(executor, list(stages))


def local_stage(store: BlockStore, head: HeadRole) -> StageModel:
    """All of the model's layers, with the head's cache geometry, device and dtype:
    what the head runs once it leaves the pipeline. Blocking (weights to the device)."""
    from cascade_worker.engine.stage import StageModel

    model = head.executor.head
    config = model.config
    return StageModel.load(
        store, config, 0, config.num_layers, model.cache.config,
        device=model.device, dtype=model.dtype,
    )  # fmt: skip


def switch_to_local(core: Any, head: HeadRole, full: StageModel) -> None:
    """On the engine thread, between steps: run every layer here from the next step
    (running requests recompute their KV cache from their tokens) and detach."""
    head.left = True
    try:
        head.executor.switch_to_local(core, full)
    except BaseException:
        head.left = False
        raise
