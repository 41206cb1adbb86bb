"""The serving half of a worker's GET /v1/status: engine, pipeline role and mode."""

from __future__ import annotations

from cascade_protocol.status import EnginePhase, ServingMode, WorkerStatus
from cascade_worker.serving.service import Serving


def serving_mode(serving: Serving) -> ServingMode:
    """How the worker takes part in serving now (a head before local: a head's engine
    runs its layers through stages; an engine beside a stage is local)."""
    if serving.head is not None:
        return ServingMode.HEAD
    if serving.engine is not None and not serving.engine.stopped:
        return ServingMode.LOCAL
    if serving.stage is not None:
        return ServingMode.STAGE
    node = serving.state.node
    receiving = node is not None and not node.role.is_source
    return ServingMode.LOADING if receiving else ServingMode.IDLE


def serving_status(serving: Serving, status: WorkerStatus) -> WorkerStatus:
    """`status` with how the engine (or pipeline stage) serves."""
    engine, phase = serving.engine, serving.phase
    failure = engine.failure or engine.last_failure if engine is not None else None
    return status.model_copy(
        update={
            "serving": phase == EnginePhase.SERVING,
            "draining": phase == EnginePhase.DRAINING,
            "engine": phase,
            "engine_error": failure or serving.error,
            "max_batch": engine.max_batch if engine else 0,
            "max_model_len": engine.max_model_len if engine else 0,
            "running": engine.running if engine else 0,
            "waiting": engine.waiting if engine else 0,
            "layers": serving.layers,
            "pipeline": serving.head.describe() if serving.head is not None else None,
            "stage": serving.stage.describe() if serving.stage is not None else None,
            "mode": serving_mode(serving),
            "materialization": serving.restore.info if serving.restore is not None else None,
        }
    )
