"""The ModelDeployment custom resource (cascade.dev/v1alpha1, short name `md`).

One ModelDeployment is one served model: where its weights live, how each instance is
shaped, how many instances run, and the policies that scale them (HPA-v2 style
`behavior`, SLO classes, multicast loading, live scaling, host copies, materialization).
A minimal manifest needs only `spec.model.uri` (and usually `spec.replicas`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, field_validator

from cascade_api.base import ApiModel, Condition
from cascade_api.materialization import InstanceMaterialization, MaterializationStatus
from cascade_api.scaling import AutoscalerStatus, Scaling

Quantity = Annotated[int | str, Field(description="A resource quantity, e.g. 2, 500m, 16Gi.")]

# A path segment that is not empty, "." or "..": a URI names its directory one way, and
# no path climbs out of its root (pvc://claim/../../etc would mount the claim and read
# the node's /etc). RE2 and Rust regex, no look-around: the API server checks it too.
_SEGMENT = r"(?:[^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+)"
MODEL_URI_PATTERN = (
    rf"^(file://(/{_SEGMENT})+/?|pvc://[a-z0-9]([-a-z0-9]*[a-z0-9])?(/{_SEGMENT})+/?)$"
)


def dot_segment(uri: str) -> str | None:
    """The first empty, '.' or '..' segment of the URI's path, if any."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme not in ("file", "pvc"):
        return None
    path = rest if scheme == "file" else rest.partition("/")[2]
    segments = path.removeprefix("/").removesuffix("/").split("/")
    return next((seg for seg in segments if seg in ("", ".", "..")), None)


class ModelSource(ApiModel):
    uri: str = Field(
        pattern=MODEL_URI_PATTERN,
        description="Where the weights live: file:///abs/path or pvc://<claim>/<path>. "
        "Path segments may not be empty, '.' or '..'; a file:// path must lie below one of "
        "the operator's model roots (chart value models.fileRoots).",
    )
    served_name: str | None = Field(
        default=None,
        max_length=253,
        description="Name clients use in the OpenAI API; defaults to the resource name.",
    )
    digest: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{64}$",
        description="Pins the weights: the SHA-256 model digest (`cascade model inspect DIR "
        "--blocks N` prints it, N = multicast.blocks). A checkpoint read from storage and "
        "every plan's model must have it, or nothing serves from them.",
    )

    @field_validator("uri", mode="before")
    @classmethod
    def _no_dot_segments(cls, uri: object) -> object:
        """Say which segment is wrong (the pattern alone would only quote itself)."""
        found = dot_segment(uri) if isinstance(uri, str) else None
        if found is not None:
            what = "an empty" if found == "" else f"a '{found}'"
            raise ValueError(f"{what} path segment in {uri!r}: name the directory itself")
        return uri


class Dtype(StrEnum):
    AUTO = "auto"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT32 = "float32"


class Device(StrEnum):
    AUTO = "auto"
    CUDA = "cuda"
    CPU = "cpu"


class EngineOptions(ApiModel):
    device: Device = Field(
        default=Device.AUTO,
        description="Where the engine computes. auto: CUDA when the pod was given GPUs "
        "(instance.gpus) and CUDA is available, else the CPU. A pod that asks for GPUs "
        "(or cuda) and finds no CUDA device fails its start with an error naming the pod, "
        "the device asked for and what it found, unless its node declares itself an "
        "emulation (the dev cluster's nodes do). Host copies hold weights in host memory "
        "whatever this says.",
    )
    dtype: Dtype = Field(
        default=Dtype.AUTO,
        description="Weight and activation dtype. auto: float32 on the CPU; on CUDA "
        "bfloat16, or float16 for a float16 checkpoint.",
    )
    max_model_len: int = Field(
        default=4096, ge=16, le=1_048_576, description="Longest prompt plus completion, tokens."
    )
    max_batch_size: int = Field(
        default=64, ge=1, le=4096, description="Upper bound on the running batch per instance."
    )
    max_prefill_tokens_per_step: int = Field(
        default=512,
        ge=16,
        le=1_048_576,
        description="Chunked prefill: the most prompt tokens one engine step prefills beside "
        "its decodes. A smaller budget bounds the step time, and so the inter-token latency "
        "of the running requests, while a new prompt is prefilled over more steps (a longer "
        "TTFT). Size it so that a decode step plus this many prefill tokens meets the ITL SLO.",
    )
    adaptive_batch: bool = Field(
        default=True,
        description="Let each instance's local autoscaler (Chiron Algorithm 1) move its batch "
        "cap within [1, maxBatchSize] to hold the tightest ITL SLO of its running requests.",
    )


class Toleration(ApiModel):
    key: str | None = Field(default=None, description="Taint key; empty matches all keys.")
    operator: str = Field(default="Equal", pattern="^(Equal|Exists)$", description="Equal|Exists.")
    value: str | None = Field(default=None, description="Taint value for Equal.")
    effect: str | None = Field(
        default=None,
        pattern="^(NoSchedule|PreferNoSchedule|NoExecute)$",
        description="Taint effect to tolerate; empty matches all.",
    )
    toleration_seconds: int | None = Field(default=None, description="For NoExecute only.")


class Resources(ApiModel):
    requests: dict[str, Quantity] = Field(default_factory=dict, description="Minimum resources.")
    limits: dict[str, Quantity] = Field(default_factory=dict, description="Maximum resources.")


class EnvVar(ApiModel):
    name: str = Field(
        min_length=1, max_length=256, pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$",
        description="Variable name.",
    )  # fmt: skip
    value: str = Field(default="", max_length=32768, description="Its value.")


class InstanceShape(ApiModel):
    gpus: int = Field(
        default=1,
        ge=0,
        le=16,
        description="GPUs requested per instance (nvidia.com/gpu, plus the RDMA resource the "
        "operator is configured with, chart value rdma.resourceName, when > 0). With "
        "engine.device auto the engine computes on them (CUDA), and a pod that was given "
        "GPUs but finds no CUDA fails its start.",
    )
    resources: Resources = Field(
        default_factory=Resources, description="Extra CPU/memory requests and limits."
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels an instance's node must carry."
    )
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Taints an instance tolerates."
    )
    runtime_class_name: str | None = Field(
        default=None,
        max_length=253,
        description="RuntimeClass of the worker pods (e.g. nvidia, where the NVIDIA container "
        "runtime is not the node's default); the chart's workers.runtimeClassName otherwise.",
    )
    annotations: dict[str, str] = Field(
        default_factory=dict,
        description="Annotations of the worker pods, over the chart's workers.annotations "
        "(e.g. k8s.v1.cni.cncf.io/networks for a Multus data network).",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=64,
        description="Extra environment of the worker container, after the operator's own "
        "(so UCX_TLS, UCX_NET_DEVICES or NCCL settings here win over the chart's ucx values).",
    )
    shm_size: str = Field(
        default="",
        max_length=32,
        pattern=r"^([0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?)?$",
        description="Size of a memory-backed /dev/shm for the worker, e.g. 8Gi (UCX's "
        "shared-memory transport and pinned staging use it); empty: the runtime's default "
        "(often 64Mi).",
    )


class InteractiveSlo(ApiModel):
    ttft_ms: int = Field(default=1000, ge=1, le=3_600_000, description="Time to first token, ms.")
    itl_ms: int = Field(default=100, ge=1, le=60_000, description="Inter-token latency, ms.")


class BatchSlo(ApiModel):
    ttft_ms: int = Field(default=60_000, ge=1, le=3_600_000, description="Time to first token, ms.")
    itl_ms: int = Field(default=1000, ge=1, le=60_000, description="Inter-token latency, ms.")


class QueueOrder(StrEnum):
    """How the gateway orders a class's queue (cascade_protocol.queue_order)."""

    ON_TIME_FIRST = "OnTimeFirst"  # late requests step behind on-time ones
    FIFO = "FIFO"  # first come, first served, late or not


class SloClasses(ApiModel):
    interactive: InteractiveSlo = Field(
        default_factory=InteractiveSlo,
        description="Latency-sensitive requests (the default class).",
    )
    batch: BatchSlo = Field(
        default_factory=BatchSlo,
        description="Throughput requests, marked by a field or header.",
    )
    queue_order: QueueOrder = Field(
        default=QueueOrder.ON_TIME_FIRST,
        description="How the gateway orders each class's queue. OnTimeFirst: once a "
        "queued request can no longer meet its TTFT SLO it steps behind the on-time ones "
        "(most requests meet the SLO under a backlog; the late ones wait until no on-time "
        "request does). FIFO: first come, first served (every request waits out the "
        "backlog ahead of it, none longer).",
    )


class MulticastStrategy(StrEnum):
    AUTO = "auto"
    CHAIN = "chain"
    BINOMIAL = "binomial"


class Multicast(ApiModel):
    strategy: MulticastStrategy = Field(
        default=MulticastStrategy.AUTO,
        description="chain, binomial, or auto (the faster predicted plan).",
    )
    blocks: int = Field(
        default=16,
        ge=1,
        le=4096,
        description="Blocks the model is cut into when loaded from storage (at most one per "
        "layer).",
    )
    k: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Sources per binomial pipeline (k-way); used by strategy binomial only "
        "(chain and auto use every usable source).",
    )
    from_peers: bool = Field(
        default=True,
        description="New instances copy the weights from instances that hold them (a "
        "ScalePlan); false: each reads the model's storage itself, as the first one does "
        "(fast local storage, or a baseline to compare scale-ups against).",
    )
    rate_mbit: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Cap on the weight traffic each worker sends during a scale-up, Mbit/s, "
        "leaving the rest of its NIC to serving (BlitzScale throttles scale-out traffic the "
        "same way); plans are predicted at the capped rate. Unset: no cap.",
    )


class Materialization(ApiModel):
    enabled: bool = Field(
        default=False,
        description="Opt in: the profile Job takes the accelerator an instance would, once "
        "per model and engine settings.",
    )


class LiveScaling(ApiModel):
    enabled: bool = Field(
        default=True,
        description="During a scale-up the targets form the ScalePlan's executionPipelines "
        "(with a source as the last stage) as soon as their blocks cover the model, and each "
        "target serves alone the moment it holds every block; off: targets serve once "
        "complete, when the operator next tells them to.",
    )
    cooperative: bool = Field(
        default=True,
        description="With enabled: a source and the target it pairs with cooperate from the "
        "target's first block (BlitzScale): the source's queued requests move to the target, "
        "which runs the layers it holds (a split chosen per batch by zigzag scheduling) and "
        "the source the rest; off: the pair forms once the target holds half the layers.",
    )
    min_lead_seconds: float = Field(
        default=1.0,
        ge=0,
        le=3600,
        description="With enabled: an execution pipeline forms only where the plan predicts "
        "it serves at least this long before one of its members could serve alone. Setting "
        "one up (the head's KV cache, a stage on the source) takes CPU and memory from pods "
        "that are receiving, which a shorter window does not repay. 0: any lead.",
    )

    @property
    def cooperating(self) -> bool:
        """Cooperative execution is on (it needs live scaling on)."""
        return self.enabled and self.cooperative


class ModelDeploymentSpec(ApiModel):
    model: ModelSource = Field(
        description="The model's weights. A change does not replace running instances, and "
        "new ones copy the weights running ones hold; scale to 0 and back to switch models."
    )
    replicas: int = Field(
        default=1,
        ge=0,
        le=10_000,
        description="Desired instances, within the scaling bounds; set through /scale "
        "(kubectl scale, an HPA) or by the Cascade autoscaler when spec.scaling.autoscaler "
        "resolves to Cascade.",
    )
    engine: EngineOptions = Field(
        default_factory=EngineOptions,
        description="Engine options, read when an instance starts; running ones keep theirs.",
    )
    instance: InstanceShape = Field(
        default_factory=InstanceShape,
        description="Shape of one instance, applied to pods created after a change.",
    )
    scaling: Scaling = Field(
        default_factory=Scaling,
        description="Replica bounds (enforced on spec.replicas), who owns spec.replicas, and "
        "the Cascade autoscaler's knobs.",
    )
    slo: SloClasses = Field(
        default_factory=SloClasses,
        description="SLO targets per class: the ITL targets bound each instance's batch cap "
        "(engine.adaptiveBatch), the TTFT targets are the gateway's queue deadlines and the "
        "batch queue's request groups in the Cascade autoscaler.",
    )
    multicast: Multicast = Field(
        default_factory=Multicast, description="How ScalePlans stream weights to new instances."
    )
    live_scaling: LiveScaling = Field(
        default_factory=lambda: LiveScaling(),
        description="Serve from partially loaded instances during scale-ups.",
    )
    host_copies: int = Field(
        default=1,
        ge=0,
        le=64,
        description="Host copies of the model: pods apart from the instances (not counted "
        "in replicas, kept at replicas 0) that hold its packed blocks in host memory, run no "
        "engine, and send them to new instances as ScalePlan sources of tier host. Placed on "
        "distinct nodes (different leaf switches preferred); a lost one is re-created and "
        "filled from a peer, or from storage when none holds the model. 0: none, so scaling "
        "from zero reads storage again.",
    )
    materialization: Materialization = Field(
        default_factory=Materialization,
        description="Materialized start-up state (Medusa). On: a profile Job runs the worker "
        "once per (model digest, accelerator, dtype, engine limits) and records the engine's "
        "start-up state (its KV-cache sizing; compile caches too where the worker compiles, "
        "which the operator leaves off) beside the weights in .materialized/ (a pvc:// claim "
        "is mounted writable in that Job only). Instances restore it instead of profiling: a "
        "one-process engine start does, a live scale-up's pipeline head does not. An "
        "artifact recorded for another start is refused with a Warning Event, and that start "
        "profiles. Off: no Job; workers neither restore nor pass on artifacts.",
    )


class InstancePhase(StrEnum):
    PENDING = "Pending"
    LOADING = "Loading"
    READY = "Ready"
    TERMINATING = "Terminating"
    FAILED = "Failed"


class InstanceMode(StrEnum):
    """How an instance takes part in serving (the worker's status: ServingMode's values)."""

    IDLE = "idle"
    LOADING = "loading"
    STAGE = "stage"
    HEAD = "head"
    LOCAL = "local"


class InstanceStartup(ApiModel):
    """How an instance started, as its worker reports it (plus the scheduling wait)."""

    stages: dict[str, float] = Field(
        default_factory=dict,
        description="Seconds per start-up stage: scheduled (pod created -> placed), process "
        "(process created -> the worker runs), imports, weights (the order that filled its "
        "store -> it held the whole model), engine_init, kv_sizing, warmup.",
    )
    weights_from: str | None = Field(
        default=None, description="Where its weights came from: storage, peer or host."
    )
    weights_bytes: int = Field(default=0, ge=0, description="Bytes of weights it received.")
    ready_seconds: float | None = Field(
        default=None, description="Pod creation -> its engine first took requests."
    )


class InstanceDevice(ApiModel):
    """What an instance's engine computes on, as its worker reports it."""

    kind: str = Field(description="cuda or cpu.")
    name: str = Field(description="The accelerator's product name (or cpu).")
    memory_bytes: int = Field(default=0, ge=0, description="The device's memory, bytes.")
    emulated: bool = Field(
        default=False,
        description="A CPU standing in for the pod's GPUs on a node that declares itself an "
        "emulation (the dev cluster).",
    )


class InstanceStatus(ApiModel):
    pod: str = Field(description="Worker pod name.")
    node: str | None = Field(default=None, description="Node the pod runs on.")
    phase: InstancePhase = Field(description="Pending, Loading, Ready, Terminating or Failed.")
    blocks_loaded: int = Field(default=0, ge=0, description="Weight blocks held.")
    mode: InstanceMode | None = Field(
        default=None,
        description="How its worker serves now, as it reports: idle, loading (receives "
        "weights), stage (runs some layers of another instance's execution pipeline), head "
        "(takes requests, runs the first layers, the rest on its stages) or local (runs "
        "every layer, maybe serving as a stage as well). Unset when the worker did not "
        "answer the last poll.",
    )
    startup: InstanceStartup | None = Field(
        default=None, description="Its start-up stages, once its worker reported them."
    )
    materialization: InstanceMaterialization | None = Field(
        default=None, description="What its start did with materialized state, as reported."
    )
    device: InstanceDevice | None = Field(
        default=None, description="What its engine computes on, once its worker reported it."
    )


class HostCopyStatus(ApiModel):
    pod: str = Field(description="Host-copy pod name.")
    node: str | None = Field(default=None, description="Node the pod runs on.")
    ready: bool = Field(default=False, description="Holds the whole model.")
    bytes_held: int = Field(default=0, ge=0, description="Bytes of model blocks it holds.")


class ModelDeploymentStatus(ApiModel):
    observed_generation: int | None = Field(default=None, description="Last generation acted on.")
    replicas: int = Field(default=0, ge=0, description="Worker pods that exist (not deleting).")
    ready_replicas: int = Field(default=0, ge=0, description="Instances serving.")
    loading_replicas: int = Field(default=0, ge=0, description="Instances started, not serving.")
    selector: str = Field(default="", description="Label selector of the worker pods (/scale).")
    conditions: list[Condition] = Field(default_factory=list, description="Available etc.")
    instances: list[InstanceStatus] = Field(default_factory=list, description="One per pod.")
    host_copies: list[HostCopyStatus] = Field(
        default_factory=list, description="One per host-copy pod (spec.hostCopies)."
    )
    current_plan: str | None = Field(default=None, description="ScalePlan being executed.")
    endpoint: str | None = Field(default=None, description="In-cluster URL of the gateway.")
    autoscaler: AutoscalerStatus | None = Field(
        default=None, description="Who owns spec.replicas; the Cascade autoscaler's last word."
    )
    materialization: MaterializationStatus | None = Field(
        default=None, description="The profile Job and how many instances restored its state."
    )

    @field_validator("conditions")
    @classmethod
    def _unique_condition_types(cls, value: list[Condition]) -> list[Condition]:
        types = [c.type for c in value]
        if len(types) != len(set(types)):
            raise ValueError("condition types must be unique")
        return value
