"""Execution pipelines: one model's layer ranges in separate processes (λScale §4.3-4.4).

A pipeline member that holds only some of a model's blocks still serves: the head (the
process with the engine, its scheduler, tokenizer and sampling) runs layers [0, a), and
stage processes run [a, b), [b, c), ... up to the LM head, connected by the UCX
transport. `PipelineExecutor` (executor.py) is the engine's `Executor` over such a
chain; it cuts every step into micro-batches (microbatch.py) so the head and all stages
work on different ones at once. `StageServer` (server.py) is one stage; `python -m
cascade_worker.pipeline.stage_process` (stage_process.py) runs one as a process, and `python -m
cascade_worker.pipeline.head` (head.py) drives a head with synthetic requests. The wire
protocol is frames.py + wire.py. Once the head holds the whole model,
`PipelineExecutor.switch_to_local` moves the engine to local execution, recomputing
every running request's KV cache from its tokens.

Names below load lazily, so importing a pure submodule (frames, microbatch) does not
pull in the transport.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cascade_worker.pipeline.executor import PipelineError, PipelineExecutor
    from cascade_worker.pipeline.head import head_engine
    from cascade_worker.pipeline.server import StageServer

_EXPORTS = {
    "PipelineError": "cascade_worker.pipeline.executor",
    "PipelineExecutor": "cascade_worker.pipeline.executor",
    "StageServer": "cascade_worker.pipeline.server",
    "head_engine": "cascade_worker.pipeline.head",
}

__all__ = ["PipelineError", "PipelineExecutor", "StageServer", "head_engine"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
