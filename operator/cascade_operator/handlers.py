"""kopf handlers: thin. Each one finds which ModelDeployment an event concerns and asks
the controller to reconcile it; all decisions live in pure functions it calls.

Reconciling is level-triggered (every watch event of the ModelDeployment, its pods,
its gateway, its ScalePlans or its profile Job, plus a periodic resync), so a missed
event or an operator restart costs one resync, never a wrong state. Workers' transfer
progress makes no API events, so while weights move, or a refused write waits for its
retry (refusals.py), a fast timer reconciles every second (`Controller.due`). A worker
starting to answer makes no event either (its pod was Running already), and a plan
should start within a second of it: while a deployment has running pods whose worker
did not answer, a cheaper timer probes just their status every STARTING_POLL_S and
reconciles the moment one answers. The Cascade autoscaler
ticks on its own timer (AUTOSCALE_SECONDS), never on watch events.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf

from cascade_api import constants as c
from cascade_operator.clients.kube import Cluster, load_config
from cascade_operator.config import AUTOSCALE_SECONDS, STARTING_POLL_S, OperatorConfig
from cascade_operator.controller import Controller, owner_of
from cascade_operator.metrics import OperatorMetrics

MANAGED = {c.LABEL_MANAGED_BY: c.MANAGED_BY}
_state: dict[str, Controller] = {}
METRICS = OperatorMetrics()  # the process's series; main serves them on the metrics port


def controller() -> Controller:
    return _state["controller"]


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    load_config()
    cfg = OperatorConfig.from_env()
    _state["controller"] = Controller(Cluster(), cfg, metrics=METRICS)
    settings.persistence.finalizer = c.FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=c.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=c.GROUP, key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING  # our own events say what happened
    settings.watching.server_timeout = 270
    settings.watching.client_timeout = 300


@kopf.on.event(c.GROUP, c.VERSION, c.MD_PLURAL)
def on_model_deployment(type: str, body: kopf.Body, **_: Any) -> None:
    if type == "DELETED" or body.metadata.get("deletionTimestamp"):
        return
    controller().reconcile(body.metadata["namespace"], body.metadata["name"])


@kopf.on.event("", "v1", "pods", labels=MANAGED)
@kopf.on.event("apps", "v1", "deployments", labels=MANAGED)
@kopf.on.event("batch", "v1", "jobs", labels=MANAGED)
@kopf.on.event(c.GROUP, c.VERSION, c.SP_PLURAL, labels=MANAGED)
def on_owned_object(body: kopf.Body, **_: Any) -> None:
    md = owner_of(dict(body.metadata.get("labels") or {}))
    if md:
        controller().reconcile(body.metadata["namespace"], md)


@kopf.timer(c.GROUP, c.VERSION, c.MD_PLURAL, interval=30.0, initial_delay=5.0)
def resync(body: kopf.Body, **_: Any) -> None:
    if not body.metadata.get("deletionTimestamp"):
        controller().reconcile(body.metadata["namespace"], body.metadata["name"])


@kopf.timer(c.GROUP, c.VERSION, c.MD_PLURAL, interval=1.0, initial_delay=1.0)
def poll_moving(body: kopf.Body, **_: Any) -> None:
    """Follow a ScalePlan's progress (and a loading worker) closely while weights move;
    retry a write the API server refused (409, 429, 5xx) once its backoff is over."""
    namespace, name = body.metadata["namespace"], body.metadata["name"]
    if not body.metadata.get("deletionTimestamp") and controller().due(namespace, name):
        controller().reconcile(namespace, name)


@kopf.timer(c.GROUP, c.VERSION, c.MD_PLURAL, interval=STARTING_POLL_S, initial_delay=1.0)
def poll_starting(body: kopf.Body, **_: Any) -> None:
    """Reconcile as soon as a starting worker answers, so its plan starts at once."""
    namespace, name = body.metadata["namespace"], body.metadata["name"]
    if not body.metadata.get("deletionTimestamp") and controller().answering(namespace, name):
        controller().reconcile(namespace, name)


@kopf.timer(c.GROUP, c.VERSION, c.MD_PLURAL, interval=AUTOSCALE_SECONDS, initial_delay=2.0)
def autoscale(body: kopf.Body, spec: kopf.Spec, **_: Any) -> None:
    """The Cascade autoscaler's tick (only deployments whose replicas Cascade owns)."""
    if not body.metadata.get("deletionTimestamp"):
        controller().autoscale(body.metadata["namespace"], body.metadata["name"], dict(spec))


@kopf.on.delete(c.GROUP, c.VERSION, c.MD_PLURAL)
def on_delete(
    body: kopf.Body, logger: logging.Logger | logging.LoggerAdapter[Any], **_: Any
) -> None:
    remaining = controller().cleanup(body.metadata["namespace"], body.metadata["name"])
    logger.info("deleted owned objects; %d pod(s) terminating", remaining)


@kopf.on.probe(id="reconcilers")
def probe(**_: Any) -> int:
    return len(_state)
