"""The multicast protocol's control frames (one discriminated union, see transport.frames).

Two conversations run over separate connections:

control (every node ↔ the leader, the plan's first source)
    node → leader  hello{node, want_manifest}   leader → node  manifest{...} (if wanted)
    node → leader  ready{node}                  leader → node  start{}  (common start)
    node → leader  done{node, missing, ...}     leader → node  shutdown{}

data (a receiver → the peer it pulls from)
    receiver → sender  attach{node}  (once, right after connecting: who this is)

The frame that opens a connection (hello, attach, or a fetch) carries a `proof` of the
deployment's peer token (cascade_protocol.peer_auth); a server holding the token refuses
a connection without a valid one, or from a node that is not in the plan.
    receiver → sender  fetch{blocks, cut_through, step}
    sender → receiver  for each requested block, in order: block{index, nbytes,
                       chunk_bytes} followed by the block's chunk messages, or
                       unavailable{index, reason} when the sender cannot serve it.
    receiver → sender  landed{index}  after each block of a binomial step's fetch: the
                       sender holds its step slot until then (see Landed)

Anything else arriving where a conversation does not expect it is a protocol error:
that connection is closed and logged.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from cascade_protocol import limits
from cascade_protocol.materialize import MaterializedState
from cascade_protocol.peer_auth import PeerProof
from cascade_worker.blocks.manifest import ModelManifest
from cascade_worker.transport.frames import FrameCodec


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# A block index (the receiver checks it against the manifest); a list of them is sized
# by the model's blocks, so it is bounded like them.
BlockIndex = Annotated[int, Field(ge=0, lt=limits.MAX_MODEL_BLOCKS)]
BlockList = Annotated[list[BlockIndex], Field(max_length=limits.MAX_MODEL_BLOCKS)]


class Hello(_Frame):
    kind: Literal["hello"] = "hello"
    node: str
    want_manifest: bool = False
    digest: str | None = None  # model digest a source holds (checked against the leader's)
    proof: PeerProof | None = None  # the deployment's token (peer_auth): opens the connection


class Manifest(_Frame):
    kind: Literal["manifest"] = "manifest"
    manifest: ModelManifest
    # The leader's materialized start-up state for this model: it travels with the
    # weights, and each receiver checks its key before restoring it (control/artifacts.py).
    materialized: list[MaterializedState] = []


class Ready(_Frame):
    kind: Literal["ready"] = "ready"
    node: str


class Start(_Frame):
    kind: Literal["start"] = "start"
    # Seconds since the leader's time zero when this left (a chain hop that joins a
    # running transfer: how late; the node logs it).
    since_s: float = Field(default=0.0, ge=0.0)


class Done(_Frame):
    kind: Literal["done"] = "done"
    node: str
    missing: BlockList = Field(default_factory=list)
    complete_s: float | None = None


class Alive(_Frame):
    """A follower's heartbeat between `start` and `done`: a peer that died without
    closing its connection (its node gone, its packets black-holed) shows as silence."""

    kind: Literal["alive"] = "alive"
    node: str


class Shutdown(_Frame):
    kind: Literal["shutdown"] = "shutdown"


class Attach(_Frame):
    kind: Literal["attach"] = "attach"
    node: str
    proof: PeerProof | None = None


class Fetch(_Frame):
    kind: Literal["fetch"] = "fetch"
    node: str  # who asks (for logs and fault injection)
    proof: PeerProof | None = None  # needed when a fetch opens the connection
    blocks: BlockList = Field(min_length=1)
    # True: the sender may relay a block while it is still arriving (chains). False: only
    # verified, installed blocks (retries after a checksum failure, binomial steps).
    cut_through: bool = False
    # Binomial step this fetch executes; the sender serves such requests one at a time.
    step: int | None = None


class BlockHeader(_Frame):
    kind: Literal["block"] = "block"
    index: int = Field(ge=0)
    nbytes: int = Field(ge=0)
    chunk_bytes: int = Field(gt=0)


class Landed(_Frame):
    """A binomial step's block is in the receiver's buffer. Eager sends complete when
    their bytes are in the sender's socket, not at the receiver; a sender that started
    its next step then shared its NIC between two steps the schedule gives it one at a
    time (1 -> 15 binomial 1.53x -> 1.73x M/B), so a step ends when this arrives."""

    kind: Literal["landed"] = "landed"
    index: int = Field(ge=0)


class Unavailable(_Frame):
    kind: Literal["unavailable"] = "unavailable"
    index: int = Field(ge=0)
    reason: str = ""


FrameT = (
    Hello
    | Manifest
    | Ready
    | Start
    | Alive
    | Done
    | Shutdown
    | Attach
    | Fetch
    | BlockHeader
    | Landed
    | Unavailable
)
Frame = Annotated[FrameT, Field(discriminator="kind")]

CODEC: FrameCodec[FrameT] = FrameCodec(TypeAdapter(Frame))
