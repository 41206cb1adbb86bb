"""A shared port lent to successive users: one bind, each user's own connections."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field, TypeAdapter

from cascade_worker.transport import Endpoint, EndpointPool, FrameCodec, TransportError
from cascade_worker.transport.shared import SharedServer

pytestmark = [pytest.mark.timeout(60), pytest.mark.ucx]


class Ask(BaseModel):
    kind: Literal["ask"] = "ask"


class Answer(BaseModel):
    kind: Literal["answer"] = "answer"
    user: str


Frame = Annotated[Ask | Answer, Field(discriminator="kind")]
CODEC: FrameCodec[Ask | Answer] = FrameCodec(TypeAdapter(Frame))


def answering(user: str) -> Callable[[Endpoint[Ask | Answer]], Awaitable[None]]:
    async def handle(ep: Endpoint[Ask | Answer]) -> None:
        while True:
            await ep.recv_frame()
            await ep.send_frame(Answer(user=user))

    return handle


async def ask(pool: EndpointPool[Ask | Answer], address: str) -> str:
    ep = await pool.get(address)
    await ep.send_frame(Ask())
    reply = await ep.recv_frame(timeout=5)
    assert isinstance(reply, Answer)
    return reply.user


def test_successive_users_share_one_bind_and_keep_their_connections_apart() -> None:
    async def scenario() -> None:
        port = SharedServer(CODEC, "127.0.0.1", 0, name="data")
        pool: EndpointPool[Ask | Answer] = EndpointPool(CODEC)
        try:
            first = await port.lend(answering("first")).start()
            address = first.address
            assert await ask(pool, address) == "first"
            with pytest.raises(RuntimeError, match="lent to another user"):
                await port.lend(answering("intruder")).start()

            await first.close()  # its connection ends; the port stays bound
            ep = await pool.get(address)
            with pytest.raises(TransportError):
                await ep.send_frame(Ask())
                await ep.recv_frame(timeout=5)
            pool.abort_all()

            # Between users a connection is refused, not handed to a stale handler.
            ep = await pool.get(address)
            with pytest.raises(TransportError):
                await ep.send_frame(Ask())
                await ep.recv_frame(timeout=5)
            pool.abort_all()

            second = await port.lend(answering("second")).start()
            assert second.address == address
            assert await ask(pool, address) == "second"
            await second.close()
            await first.close()  # a former user's late close takes nothing from the next
        finally:
            await pool.close()
            await port.close()

    asyncio.run(scenario())
