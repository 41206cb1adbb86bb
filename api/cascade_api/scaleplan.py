"""The ScalePlan custom resource (cascade.dev/v1alpha1, short name `sp`).

A ScalePlan is one planned weight transfer for a ModelDeployment: which blocks exist,
who sends them (GPU instances or host copies), who receives, and in what shape
(serial-forwarding chains or a k-way binomial pipeline). The operator writes the spec
once; workers' progress lands in status until the plan is Completed, Failed or
Cancelled. Plans name pods, so a plan is readable without knowing the planner.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from cascade_api.base import ApiModel, Condition


class SourceTier(StrEnum):
    GPU = "gpu"
    HOST = "host"


class PlanStrategy(StrEnum):
    CHAIN = "chain"
    BINOMIAL = "binomial"


class Block(ApiModel):
    index: int = Field(ge=0, description="Block number, 0-based.")
    layer_start: int = Field(ge=0, description="First layer in the block.")
    layer_end: int = Field(ge=0, description="One past the last layer in the block.")
    bytes: int = Field(ge=0, description="Packed size of the block.")
    checksum: str = Field(min_length=1, description="xxh3-128 digest of the packed block.")


class Source(ApiModel):
    pod: str = Field(description="Pod that holds the whole model.")
    tier: SourceTier = Field(
        description="gpu (a serving instance) or host (a host copy or an idle holder); "
        "a label only: both send the same way."
    )


class Chain(ApiModel):
    source: str = Field(description="Pod the chain starts at.")
    hops: list[str] = Field(min_length=1, description="Receivers in forwarding order.")
    blocks: list[int] = Field(default_factory=list, description="Blocks it carries; all if empty.")


class Transfer(ApiModel):
    sender: str = Field(description="Pod that sends.")
    receiver: str = Field(description="Pod that receives.")
    block: int = Field(ge=0, description="Block sent.")


class Step(ApiModel):
    transfers: list[Transfer] = Field(default_factory=list, description="Sent in parallel.")


class BlockOrder(ApiModel):
    source: str = Field(description="Source pod.")
    order: list[int] = Field(description="Block indices in send order (circular shift).")


class Stage(ApiModel):
    pod: str = Field(description="Pod running this stage.")
    layer_start: int = Field(ge=0, description="First layer it runs.")
    layer_end: int = Field(ge=0, description="One past the last layer it runs.")


class ExecutionPipeline(ApiModel):
    stages: list[Stage] = Field(min_length=1, description="Stages in layer order.")
    ready_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Predicted seconds after the plan starts at which the stages' blocks "
        "cover the model, so the pipeline could start serving.",
    )


class TargetPrediction(ApiModel):
    pod: str = Field(description="Receiving pod.")
    complete_seconds: float = Field(
        ge=0, description="Predicted seconds after the start until it holds every block."
    )
    pipeline_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Predicted seconds until it could serve as a stage of an execution "
        "pipeline (unset when it joins none).",
    )
    nvlink: bool = Field(
        default=False, description="Receives from a peer in its NVLink domain, not the network."
    )


class ScalePlanSpec(ApiModel):
    deployment: str = Field(description="The ModelDeployment this plan serves.")
    model_digest: str = Field(description="Digest of the model the blocks come from.")
    blocks: list[Block] = Field(default_factory=list, description="The block table.")
    sources: list[Source] = Field(default_factory=list, description="Holders that send.")
    targets: list[str] = Field(default_factory=list, description="Pods that receive.")
    strategy: PlanStrategy = Field(description="chain or binomial.")
    chains: list[Chain] = Field(default_factory=list, description="For strategy chain.")
    schedule: list[Step] = Field(default_factory=list, description="For strategy binomial.")
    block_orders: list[BlockOrder] = Field(
        default_factory=list,
        description="Per source, the block order of its binomial sub-group (for reading: "
        "schedule already carries it).",
    )
    execution_pipelines: list[ExecutionPipeline] = Field(
        default_factory=list,
        description="Receivers that serve together while loading: with the deployment's "
        "liveScaling on, each forms (head and stages) once its members hold their layers, and "
        "dissolves as they complete. ready_seconds is the planner's prediction.",
    )
    predicted_completion_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Planner's flow-model estimate; a plan still running at a multiple of "
        "it (with a floor) fails as timed out.",
    )
    hop_latency_seconds: float = Field(
        default=0.0,
        ge=0,
        description="Start cost the prediction includes per chain hop up to a target "
        "(chain) or per step (binomial): the operator's calibrated value when planned.",
    )
    predictions: list[TargetPrediction] = Field(
        default_factory=list,
        description="Planner's flow-model prediction per target (when each can serve).",
    )
    reason: str = Field(
        default="",
        description="Why the planner chose this plan (strategy comparison, pruned sources).",
    )


class PlanPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class TargetProgress(ApiModel):
    pod: str = Field(description="Receiving pod.")
    blocks_received: int = Field(default=0, ge=0, description="Blocks installed.")
    bytes_received: int = Field(default=0, ge=0, description="Bytes installed.")
    complete: bool = Field(default=False, description="Holds every block.")
    first_complete_time: datetime | None = Field(default=None, description="When complete.")
    transfer_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Seconds from the transfer's common start until it held every block, "
        "as its worker measured (compare with spec.predictions).",
    )


class PipelineState(StrEnum):
    PLANNED = "Planned"
    SERVING = "Serving"
    DISSOLVED = "Dissolved"


class PipelineStatus(ApiModel):
    head: str = Field(
        description="The pipeline's head: its first stage's pod, which takes requests."
    )
    state: PipelineState = Field(
        default=PipelineState.PLANNED,
        description="Planned (not seen serving yet), Serving (the head's worker reports "
        "heading a pipeline with its engine serving), Dissolved (the head stopped heading it "
        "after serving, or every member holds every block, or the plan ended). Never goes "
        "back. The operator polls the head about once a second while weights move: a "
        "pipeline that formed and dissolved between two polls shows Dissolved with no times.",
    )
    covered_seconds: float | None = Field(
        default=None,
        description="When the members' blocks covered the model (the head's wall clock), in "
        "seconds after status.startTime (the operator's clock, whole seconds): the measured "
        "counterpart of readySeconds.",
    )
    serving_seconds: float | None = Field(
        default=None,
        description="When the head started serving over its stages, in seconds after "
        "status.startTime.",
    )
    serving_delay_seconds: float | None = Field(
        default=None,
        description="servingSeconds minus coveredSeconds, both on the head's clock: how long "
        "the pipeline took to serve once its members held their layers.",
    )


class ScalePlanStatus(ApiModel):
    phase: PlanPhase = Field(default=PlanPhase.PENDING, description="Lifecycle phase.")
    target_count: int = Field(default=0, ge=0, description="Number of targets.")
    progress: str = Field(default="", description="Complete targets over all, e.g. 3/6.")
    targets: list[TargetProgress] = Field(default_factory=list, description="Per target.")
    bytes_moved: int = Field(default=0, ge=0, description="Bytes delivered so far.")
    start_time: datetime | None = Field(default=None, description="When dispatched.")
    completion_time: datetime | None = Field(default=None, description="When it ended.")
    measured_completion_seconds: float | None = Field(
        default=None,
        ge=0,
        description="Slowest target's transferSeconds once all are complete: the measured "
        "counterpart of spec.predictedCompletionSeconds.",
    )
    target_answered_time: datetime | None = Field(
        default=None,
        description="When the first of its targets could receive: the earliest time a "
        "target's worker reports its control API started listening (its own clock). The "
        "operator plans as soon as a target answers, with no wait for the rest.",
    )
    first_byte_time: datetime | None = Field(
        default=None,
        description="When the plan's first bytes landed at a target, as the receiving "
        "worker reports it (its own clock): the earliest over the targets.",
    )
    start_delay_seconds: float | None = Field(
        default=None,
        description="firstByteTime minus targetAnsweredTime: how long the first target "
        "waited, once it could receive, for the plan's first bytes. A plan made for targets "
        "that waited for an earlier plan to end counts that wait too.",
    )
    pipelines: list[PipelineStatus] = Field(
        default_factory=list,
        description="One per spec.executionPipelines entry, in the same order, as each "
        "head's worker reports it.",
    )
    pipeline_summary: str = Field(
        default="", description="Pipelines per state, e.g. '1 serving, 1 planned'."
    )
    conditions: list[Condition] = Field(default_factory=list, description="Failure detail etc.")
