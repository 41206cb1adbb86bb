"""How a ModelDeployment scales: bounds, owner, Chiron's knobs and HPA-v2 `behavior`.

`behavior` is written exactly like an autoscaling/v2 HorizontalPodAutoscaler's, so a
platform team moves its HPA habits over unchanged. Who owns `spec.replicas` is explicit
(`autoscaler`): Cascade's SLO autoscaler or something external (an HPA, KEDA, a person
with `kubectl scale`), never both. As KServe's raw mode creates an HPA only when
maxReplicas > minReplicas, a manifest without `maxReplicas` keeps a fixed replica count.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from cascade_api.base import ApiModel


class PolicyType(StrEnum):
    PODS = "Pods"
    PERCENT = "Percent"


class SelectPolicy(StrEnum):
    MAX = "Max"
    MIN = "Min"
    DISABLED = "Disabled"


class ScalingPolicy(ApiModel):
    type: PolicyType = Field(description="Pods (absolute) or Percent (of current replicas).")
    value: int = Field(ge=1, description="Amount allowed to change per period.")
    period_seconds: int = Field(ge=1, le=1800, description="Length of the period.")


class ScalingRules(ApiModel):
    stabilization_window_seconds: int | None = Field(
        default=None,
        ge=0,
        le=3600,
        description="Look-back window of recommendations; up: 0, down: 300 when unset.",
    )
    select_policy: SelectPolicy = Field(
        default=SelectPolicy.MAX, description="Which policy wins when several apply."
    )
    policies: list[ScalingPolicy] = Field(
        default_factory=list, description="Rate limits; empty means the HPA defaults."
    )


class ScalingBehavior(ApiModel):
    scale_up: ScalingRules = Field(default_factory=ScalingRules, description="Rules for growth.")
    scale_down: ScalingRules = Field(
        default_factory=ScalingRules, description="Rules for shrinking."
    )


class AutoscalerOwner(StrEnum):
    CASCADE = "Cascade"
    EXTERNAL = "External"


class InteractiveBackpressure(ApiModel):
    target: float | None = Field(
        default=None,
        ge=0.05,
        le=1.0,
        description="Θ: the share of interactive+mixed instances that may be busy with "
        "interactive requests before one is added. Unset: derived from the observed "
        "arrival burstiness and the measured time to ready (docs/autoscaling.md).",
    )
    tolerance: float = Field(
        default=0.1,
        ge=0.0,
        le=0.5,
        description="δ: no change while the busy share stays within [Θ - δ, Θ + δ].",
    )


class Scaling(ApiModel):
    min_replicas: int = Field(
        default=1,
        ge=0,
        le=10_000,
        description="Lower bound on spec.replicas. 0 lets the autoscaler scale to zero after "
        "keepAliveSeconds without requests; the gateway holds requests that arrive at zero "
        "and the autoscaler starts an instance for them.",
    )
    max_replicas: int | None = Field(
        default=None,
        ge=1,
        le=10_000,
        description="Upper bound on spec.replicas. Unset: no autoscaling, spec.replicas is "
        "fixed and owned by whoever sets it (kubectl scale, an HPA).",
    )
    autoscaler: AutoscalerOwner | None = Field(
        default=None,
        description="Who writes spec.replicas: Cascade (the SLO autoscaler) or External "
        "(an HPA, KEDA or kubectl scale; the operator never writes it). Unset: Cascade when "
        "maxReplicas > minReplicas, else External.",
    )
    keep_alive_seconds: int = Field(
        default=300,
        ge=0,
        le=86_400,
        description="Idle time without any request before scaling to zero (minReplicas 0).",
    )
    interactive_backpressure: InteractiveBackpressure = Field(
        default_factory=InteractiveBackpressure,
        description="Chiron's interactive backpressure band (Θ ± δ) for the Cascade autoscaler.",
    )
    behavior: ScalingBehavior = Field(
        default_factory=ScalingBehavior,
        description="HPA-v2 stabilization windows and rate policies, applied to the Cascade "
        "autoscaler's recommendations exactly as the HPA applies them.",
    )

    @property
    def owner(self) -> AutoscalerOwner:
        """The effective owner of spec.replicas (the unset default resolved)."""
        if self.autoscaler is not None:
            return AutoscalerOwner(self.autoscaler)  # the model keeps enum values as str
        autoscaled = self.max_replicas is not None and self.max_replicas > self.min_replicas
        return AutoscalerOwner.CASCADE if autoscaled else AutoscalerOwner.EXTERNAL

    @property
    def upper(self) -> int:
        """maxReplicas, or the schema's ceiling when unset (only kubectl scale bounds it)."""
        return self.max_replicas if self.max_replicas is not None else 10_000


class RoleCounts(ApiModel):
    interactive: int = Field(default=0, ge=0, description="Instances for interactive only.")
    mixed: int = Field(default=0, ge=0, description="Interactive first, batch in spare room.")
    batch: int = Field(default=0, ge=0, description="Instances for batch requests.")


class AutoscalerStatus(ApiModel):
    owner: AutoscalerOwner = Field(description="Who writes spec.replicas now.")
    desired_replicas: int | None = Field(
        default=None, ge=0, description="The Cascade autoscaler's last recommendation."
    )
    roles: RoleCounts = Field(
        default_factory=RoleCounts, description="Instances by role (pod label cascade.dev/role)."
    )
    reason: str = Field(default="", description="Why the last recommendation is what it is.")
    theta: float | None = Field(default=None, description="Θ in use (the target or auto).")
    last_scale_time: str | None = Field(
        default=None, description="When the Cascade autoscaler last wrote spec.replicas."
    )
