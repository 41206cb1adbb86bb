"""What a live scale-up asks of the other workers of its plan: GET /v1/status, polled.

Peers are reached at the host of their data address in the plan's peers map and the
control port this worker listens on (every worker of a deployment uses the same).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

import aiohttp

from cascade_protocol.status import STATUS_PATH, ServingMode, WorkerStatus
from cascade_worker.serving.live_plan import stage_address

log = logging.getLogger(__name__)

POLL_S = 0.05  # how often a head asks its stages whether they listen
STAGES_WAIT_S = 60.0  # longest a head waits for its stages (then it serves once complete)
DISSOLVE_WAIT_S = 5.0  # longest a dissolving head waits for the others before handing back
HTTP_TIMEOUT = aiohttp.ClientTimeout(total=2)


class Peers:
    def __init__(self, data_addresses: dict[str, str], control_port: int) -> None:
        self.data = data_addresses  # pod -> "host:port" of its data (UCX) listener
        self.port = control_port

    async def status(self, http: aiohttp.ClientSession, pod: str) -> WorkerStatus | None:
        host = self.data[pod].rpartition(":")[0]
        try:
            async with http.get(f"http://{host}:{self.port}{STATUS_PATH}") as resp:
                return WorkerStatus.model_validate(await resp.json(content_type=None))
        except (TimeoutError, aiohttp.ClientError, ValueError):
            return None

    async def stages_listening(
        self, pods: Sequence[str], own_complete: Callable[[], bool | None]
    ) -> tuple[list[str], list[float]] | None:
        """Each stage's pipeline address and coverage time once all listen; None when
        one serves alone instead (no stage role), this worker completes first
        (`own_complete`; None while it has no store), or STAGES_WAIT_S passes."""
        give_up = time.monotonic() + STAGES_WAIT_S
        async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http:
            while time.monotonic() < give_up:
                complete = own_complete()
                if complete:
                    return None
                if complete is not None:  # the leader has sent the manifest
                    statuses = await asyncio.gather(*(self.status(http, p) for p in pods))
                    if any(s and s.mode == ServingMode.LOCAL and not s.stage for s in statuses):
                        log.info("live scale-up: a stage of %s serves alone; no pipeline", pods)
                        return None
                    stages = [s.stage for s in statuses if s is not None and s.stage]
                    if len(stages) == len(pods) and all(s.address for s in stages):
                        return (
                            [
                                stage_address(self.data[p], s.address or "")
                                for p, s in zip(pods, stages, strict=True)
                            ],
                            [s.covered_at or 0.0 for s in stages],
                        )
                await asyncio.sleep(POLL_S)
        log.warning("live scale-up: stages %s did not listen within %.0f s", pods, STAGES_WAIT_S)
        return None

    async def all_serving(self, pods: Sequence[str], timeout_s: float) -> bool:
        """Whether every one of `pods` serves (takes requests) within `timeout_s`."""
        give_up = time.monotonic() + timeout_s
        async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http:
            while True:
                statuses = await asyncio.gather(*(self.status(http, p) for p in pods))
                if all(s is not None and s.serving for s in statuses):
                    return True
                if time.monotonic() >= give_up:
                    return False
                await asyncio.sleep(POLL_S)
