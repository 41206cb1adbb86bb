"""What a worker holds and does, as its `GET /v1/status` answers: one typed report.

The operator polls every worker's status each reconcile tick to decide who may send,
who needs weights and who serves (and, later, the autoscaler reads it beside the load
report); people read it with curl. The worker builds one `WorkerStatus` from its
control state (held blocks, the running job, the last transfer and load) and its
serving state (engine, pipeline role) and answers it with camelCase names, like the control bodies.
Readers ignore fields they do not know, so a newer worker does not break an older
operator during a rolling upgrade.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from cascade_protocol.materialize import MaterializationInfo

STATUS_PATH = "/v1/status"


class WorkerPhase(StrEnum):
    """What the worker's block store holds, or which job fills it."""

    IDLE = "idle"  # holds nothing
    LOADING = "loading"  # packing a local checkpoint
    TRANSFERRING = "transferring"  # in a multicast plan (sending or receiving)
    READY = "ready"  # holds the whole model
    FAILED = "failed"  # the last job failed and nothing complete is held

    @property
    def busy(self) -> bool:
        """A job runs; a second one would be refused (409)."""
        return self in (WorkerPhase.LOADING, WorkerPhase.TRANSFERRING)


class EnginePhase(StrEnum):
    """Where the worker's engine (or pipeline stage) is in its life."""

    OFF = "off"  # none runs and none failed to start
    STARTING = "starting"  # being built (weights to the device) on a thread
    SERVING = "serving"  # takes requests
    DRAINING = "draining"  # finishes in-flight requests, takes no new ones
    FAILED = "failed"  # failed to start, or broke while serving

    @property
    def on(self) -> bool:
        """An engine runs or is coming up on the held model."""
        return self in (EnginePhase.STARTING, EnginePhase.SERVING)


class ServingMode(StrEnum):
    """How an instance takes part in serving now (status.instances[].mode)."""

    IDLE = "idle"  # serves nothing and receives nothing
    LOADING = "loading"  # receives weights, serves nothing yet
    STAGE = "stage"  # runs some layers for another worker's pipeline, takes no requests
    HEAD = "head"  # takes requests, runs the first layers, the rest on pipeline stages
    LOCAL = "local"  # takes requests and runs every layer itself (maybe a stage as well)


class WorkerRole(StrEnum):
    """What a worker process is for (the operator's pod component)."""

    INSTANCE = "instance"  # serves the model (an engine, a pipeline stage)
    HOST_COPY = "host-copy"  # only holds the model's blocks in host memory and sends them
    MATERIALIZE = "materialize"  # a profile Job: records start-up state once and exits


class TransferRole(StrEnum):
    SOURCE = "source"  # sent blocks it held
    TARGET = "target"  # received blocks


class Report(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


class TransferReport(Report):
    """The last transfer's outcome."""

    role: TransferRole
    complete: bool
    missing: list[int] = Field(default_factory=list)  # blocks it still lacks
    bytes_received: int = 0
    bytes_sent: int = 0
    # Seconds from the transfer's common start until this node held every block (its own
    # clock); None when it did not finish. The measured side of a plan's prediction.
    complete_s: float | None = None
    error: str | None = None

    @property
    def target_seconds(self) -> float | None:
        """How long this pod took to receive the whole model, when it did as a target."""
        if self.role != TransferRole.TARGET or not self.complete:
            return None
        return self.complete_s


class StartupStage(StrEnum):
    """A worker's start-up, in order (seconds of each in StartupInfo.stages)."""

    PROCESS = "process"  # process created -> the worker's main runs (interpreter, imports)
    IMPORTS = "imports"  # the transfer path and engine preloaded (a background thread)
    WEIGHTS = "weights"  # the order that fills the store -> it holds the whole model
    ENGINE_INIT = "engine_init"  # engine built over the store (weights to the device)
    KV_SIZING = "kv_sizing"  # the KV cache sized (profiled or restored)
    WARMUP = "warmup"  # compiled graphs / first steps warmed (compiled or restored)


class WeightsFrom(StrEnum):
    STORAGE = "storage"  # packed from the model's uri
    PEER = "peer"  # streamed from instances (a plan or a fetch)
    HOST = "host"  # streamed from host copies only


class DeviceInfo(Report):
    """What the engine computes on (engine/device.py decides it at start)."""

    kind: str  # "cuda" or "cpu"
    name: str  # the accelerator's product name ("NVIDIA H100 80GB HBM3"), or "cpu"
    memory_bytes: int = 0  # the device's memory; the host's for a CPU
    # A CPU standing in for the GPUs the pod was given, on a node that declares itself an
    # emulation (the dev cluster).
    emulated: bool = False


class StartupInfo(Report):
    """How this worker started: when, each stage's seconds, where its weights came from."""

    process_started_at: float  # wall clock (epoch seconds) the process was created
    # Wall clock its control API started listening: from then on the operator may plan
    # for it (a ScalePlan's targetAnsweredTime is its targets' earliest).
    listening_at: float | None = None
    stages: dict[StartupStage, float] = Field(default_factory=dict)
    weights_from: WeightsFrom | None = None
    weights_bytes: int = 0
    ready_at: float | None = None  # wall clock its engine first took requests
    device: DeviceInfo | None = None  # where its engine computes, decided at start


class LoadReport(Report):
    """The last load from storage (a checkpoint packed into blocks): how fast storage
    really was, beside the limit the worker applied ($CASCADE_STORAGE_MBIT)."""

    bytes_read: int  # tensor bytes read from the checkpoint
    seconds: float  # the whole load: reading, packing, checksums
    rate_mbit: float | None = None  # the storage rate limit applied; None = unlimited


class PipelineInfo(Report):
    """The engine heads an execution pipeline: layers here, the rest on stages."""

    stages: list[str]  # "host:port" of each stage, in layer order
    local_layers: tuple[int, int]  # the half-open layer range run on this worker
    # Live scale-ups (wall-clock seconds): when the members' blocks covered the model
    # (the last one to hold its layers), and when this head took its first request.
    covered_at: float | None = None
    serving_at: float | None = None


class StageInfo(Report):
    """The worker serves a layer range as a stage of another worker's pipeline."""

    layers: tuple[int, int]
    address: str | None = None  # "host:port" it listens on; None while starting
    covered_at: float | None = None  # live scale-ups: wall time its layers' blocks were held
    # A cooperating source: requests it handed to the pair's head when that head first
    # served (its queue, serving/cooperate.py); 0 before then or when nothing queued.
    redirected: int = 0


class WorkerStatus(Report):
    """GET /v1/status."""

    # Who answers: the pod's name (plans name pods), its model and its data (UCX) port.
    pod: str
    model_uri: str = ""
    data_port: int = 0
    role: WorkerRole = WorkerRole.INSTANCE
    # The block store: what it holds (or receives), and the job that fills it.
    phase: WorkerPhase = WorkerPhase.IDLE
    model_digest: str | None = None
    blocks_loaded: int = 0
    blocks_total: int = 0
    bytes_received: int = 0  # of the running transfer so far, else of the last one
    # Bytes of the blocks held: host memory for a host copy; an instance's store plays
    # the accelerator's memory (its engine's weights are views of it).
    store_bytes: int = 0
    rss_bytes: int = 0  # the worker process's resident memory (0 where unknown)
    error: str | None = None  # why the last job failed
    # Jobs failed or refused in a row (a success resets it) and when the last one did
    # (wall clock): the operator backs off its load orders by them.
    failures: int = 0
    failed_at: float | None = None
    last_transfer: TransferReport | None = None
    # Wall clock the first bytes of the running (else the last) transfer landed here as a
    # target; None before any did. A ScalePlan's firstByteTime is its targets' earliest.
    first_byte_at: float | None = None
    last_load: LoadReport | None = None  # the last successful load from storage
    # Serving: the engine's phase, why it failed, its bounds and current batch.
    serving: bool = False  # engine == serving
    draining: bool = False  # engine == draining
    engine: EnginePhase = EnginePhase.OFF
    engine_error: str | None = None
    max_batch: int = 0
    max_model_len: int = 0
    running: int = 0
    waiting: int = 0
    layers: tuple[int, int] | None = None  # what the engine runs (all of it for a head)
    pipeline: PipelineInfo | None = None  # set while the engine heads a pipeline
    stage: StageInfo | None = None  # set while serving as a pipeline stage
    mode: ServingMode = ServingMode.IDLE
    startup: StartupInfo | None = None
    materialization: MaterializationInfo | None = None  # the engine start's, when enabled

    @property
    def holds_model(self) -> bool:
        """Every block of the model is in the store (whatever job runs)."""
        return self.blocks_total > 0 and self.blocks_loaded >= self.blocks_total
