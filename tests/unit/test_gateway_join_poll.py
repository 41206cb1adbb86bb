"""The gateway polls backends that are not ready yet more often than the others, so new
capacity (a live scale-up's pipeline head, an instance that just got its weights) takes
requests within JOIN_POLL_S instead of a whole poll interval."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
from aiohttp import web

from cascade_gateway.backends import JOIN_POLL_S, BackendPool, poll_loop
from cascade_protocol.load import LoadReport


async def serve(ready: dict[str, bool], polls: dict[str, int]) -> tuple[web.AppRunner, str]:
    async def load(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        polls[name] += 1
        report = LoadReport(instance=name, model="m", ready=ready[name])
        return web.json_response(report.model_dump(mode="json"))

    app = web.Application()
    app.router.add_get("/{name}/v1/load", load)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}"


def test_backends_not_ready_are_polled_every_join_interval() -> None:
    async def go() -> None:
        ready, polls = {"old": True, "new": False}, {"old": 0, "new": 0}
        runner, base = await serve(ready, polls)
        pool = BackendPool([f"{base}/old", f"{base}/new"])
        try:
            async with aiohttp.ClientSession() as session:
                task = asyncio.create_task(poll_loop(pool, session, interval=10.0))
                await asyncio.sleep(1.0)
                assert polls["old"] == 1  # one round so far
                assert polls["new"] >= 3  # and the joiner every JOIN_POLL_S since
                ready["new"] = True
                await asyncio.sleep(3 * JOIN_POLL_S)
                assert pool.states()[1].report is not None and pool.states()[1].report.ready
                settled = polls["new"]
                await asyncio.sleep(1.0)  # ready now: back to the round's pace
                assert polls["new"] <= settled + 1 and polls["old"] == 1
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        finally:
            await runner.cleanup()

    asyncio.run(go())
