"""The serving layer: drives an engine from a thread, streams tokens over HTTP, reports load.

async_engine.py runs any `EngineCore` (engine/core.py) on one background thread and
hands each request its chunks through an asyncio queue; api.py answers `/v1/generate`
(NDJSON) and `/v1/load`; service.py owns the worker's current engine (start, drain,
readiness, status); lifecycle_routes.py adds `/v1/control/serve` and `/v1/control/drain`;
pipeline.py and pipeline_routes.py put the worker into execution pipelines, as a stage
(`/v1/control/stage`) or as the head (serve with `stages`), and take a head out of its
pipeline once it holds the whole model (`/v1/control/local`). local_autoscaler.py and
batch_control.py run Chiron's local autoscaler (--adaptive-batch): a short tick that sets
the engine's batch cap from its ITL and throughput backpressure.
"""
