"""The autoscaler's tick, the I/O around the pure policy: read, decide, write, label.

One `Autoscaler` per operator keeps each deployment's `AutoscaleState` in memory, like
the HPA controller keeps its recommendations: an operator restart forgets them, which
only makes the next ticks more cautious (stabilization starts over). A tick runs on the
autoscaler's own timer, never on every watch event, so a status write it causes does not
make the next tick; other reconciles reuse the last tick's facts for the status.

One writer: only with owner Cascade is spec.replicas written (through /scale, as an HPA
does), and the new count is handed back (`Tick.scaled_to`) so this very reconcile creates
the pods; so are the gateways' per-pod loads, so that a scale-down in the same reconcile
picks its victims from them instead of asking the gateways again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from cascade_api import constants as c
from cascade_api.base import utcnow
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaling import AutoscalerOwner
from cascade_autoscaler import policy
from cascade_autoscaler.policy_types import AutoscaleState
from cascade_operator import builders
from cascade_operator.autoscale import observe, report, roles
from cascade_operator.autoscale.report import AutoscaleFacts
from cascade_operator.clients.gateway import GatewayClient
from cascade_operator.clients.kube import Cluster
from cascade_operator.observed import MdRef, PodView

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tick:
    """One tick: what it reports, what it wrote, what the gateways said."""

    facts: AutoscaleFacts
    scaled_to: int | None = None  # spec.replicas written this tick
    in_flight: dict[str, int] | None = None  # per pod, at this tick; None: not read


@dataclass
class _Memory:
    state: AutoscaleState = field(default_factory=AutoscaleState)
    tokens_per_s: float | None = None
    last_scale_time: str | None = None
    facts: AutoscaleFacts | None = None


class Autoscaler:
    def __init__(
        self,
        cluster: Cluster,
        gateways: GatewayClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.gateways = gateways or GatewayClient()
        self.clock = clock
        self._memory: dict[tuple[str, str], _Memory] = {}

    def forget(self, ref: MdRef) -> None:
        self._memory.pop((ref.namespace, ref.name), None)

    def last(self, ref: MdRef, spec: ModelDeploymentSpec, generation: int) -> AutoscaleFacts:
        """The last tick's facts (status between ticks), or the owner's default."""
        if spec.scaling.owner == AutoscalerOwner.EXTERNAL:
            return report.external(generation)
        memory = self._memory.get((ref.namespace, ref.name))
        if memory is None or memory.facts is None:
            return report.waiting()
        # told and counted once, at the tick
        return replace(memory.facts, events=[], recommendation=None)

    def tick(
        self, ref: MdRef, spec: ModelDeploymentSpec, pods: Sequence[PodView], generation: int
    ) -> Tick:
        if spec.scaling.owner == AutoscalerOwner.EXTERNAL:
            self.forget(ref)
            return Tick(report.external(generation))
        memory = self._memory.setdefault((ref.namespace, ref.name), _Memory())
        now = self.clock()
        loads = self.gateways.loads(self._gateway_ips(ref))
        memory.tokens_per_s = observe.peak_tokens_per_s(loads, memory.tokens_per_s)
        ctx = observe.context(now, spec, pods, loads, memory.tokens_per_s, utcnow())
        rec, state = policy.decide(ctx, memory.state)
        written = None
        if rec.write:
            self.cluster.scale_md(ref.namespace, ref.name, rec.replicas)
            state = policy.applied(
                state,
                before=spec.replicas,
                after=rec.replicas,
                behavior=spec.scaling.behavior,
                now=now,
            )
            written = rec.replicas
            memory.last_scale_time = utcnow().isoformat().replace("+00:00", "Z")
            log.info("%s/%s: %s", ref.namespace, ref.name, rec.reason)
        memory.state = state
        for pod, role in roles.relabel(observe.alive(pods), rec.roles).items():
            self.cluster.label_pod(ref.namespace, pod, c.LABEL_ROLE, role.value)
        memory.facts = report.facts(
            rec,
            generation,
            last_scale_time=memory.last_scale_time,
            written=written,
            before=spec.replicas,
        )
        return Tick(memory.facts, written, observe.in_flight(loads))

    def in_flight(self, ref: MdRef) -> dict[str, int]:
        """Requests in flight per worker pod, as the gateways count them now (a scale-down
        outside a tick: someone else lowered spec.replicas)."""
        return observe.in_flight(self.gateways.loads(self._gateway_ips(ref)))

    def _gateway_ips(self, ref: MdRef) -> list[str]:
        selector = builders.component_selector(ref.name, c.COMPONENT_GATEWAY)
        pods = [PodView.of(p) for p in self.cluster.list_pods(ref.namespace, selector)]
        return [p.ip for p in pods if p.running and p.ip]
