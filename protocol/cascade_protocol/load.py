"""One instance's load, as a worker's `GET /v1/load` answers it.

The gateway polls every worker's load about once a second for least-loaded routing and
admission (queue-wait estimates), and the autoscaler reads the same numbers to decide
instance counts, so the report lives here, apart from the engine that fills it in.
Wire names are snake_case, like the generate messages it travels beside.
"""

from __future__ import annotations

from cascade_protocol.generate import Message

LOAD_PATH = "/v1/load"


class LoadReport(Message):
    """One instance's load, for least-loaded routing and the autoscaler."""

    instance: str
    model: str
    ready: bool
    draining: bool = False
    waiting: int = 0  # queued requests not yet running
    running: int = 0  # requests in the running batch
    max_batch: int = 1  # the batch cap in force now (the local autoscaler moves it)
    engine_max_batch: int = 0  # the engine's own limit: the cap never exceeds it (0: unknown)
    # The largest batch known to meet the ITL SLO (cascade_autoscaler.latency_room):
    # above max_batch when the cap fell because a larger batch did not pay in throughput.
    # 0: no local autoscaler; the cap is the room.
    batch_room: int = 0
    kv_cache_usage: float = 0.0  # fraction of KV-cache slots/tokens in use
    tokens_per_s: float = 0.0  # generated tokens per second, recent average
    max_model_len: int = 0  # context length: prompt + max_tokens must fit
    # The tokenizer's longest token in UTF-8 bytes: a prompt longer than max_model_len
    # such tokens cannot fit, refused before it is tokenized (0: no bound known).
    max_token_bytes: int = 0
    # Engine steps ended since start: a backend whose count stops moving while requests
    # wait on it makes no progress (the gateway moves them elsewhere).
    engine_steps: int = 0
    layers: tuple[int, int] | None = None  # the layer range this instance runs
    # The local autoscaler's last judged window (Chiron Algorithm 1); None: not judged yet.
    latency_backpressure: float | None = None  # ITL / tightest ITL SLO of running requests
    throughput_backpressure: float | None = None  # previous / current throughput
    backpressure: float | None = None  # max of the two: < 1 grows the cap, else halves it
