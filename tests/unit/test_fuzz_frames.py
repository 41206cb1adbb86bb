"""Property tests of the transport frame unions (multicast and pipeline): whatever a peer
sends -- bytes, any JSON, or documents shaped like a frame and bent -- the codec answers
with a frame or a `FrameError` naming the field, never another exception, and a frame
it accepts announces no allocation past the static bounds."""

from __future__ import annotations

import json
import re
from typing import Any

import fuzz_strategies as fz
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from cascade_worker.multicast import frames as multicast
from cascade_worker.pipeline import frames as pipeline
from cascade_worker.transport.frames import HEADER, HEADER_BYTES, FrameCodec, FrameError

UNIONS: dict[str, tuple[FrameCodec[Any], list[type[BaseModel]]]] = {
    "multicast": (multicast.CODEC, fz.union_members(multicast.FrameT)),
    "pipeline": (pipeline.CODEC, fz.union_members(pipeline.PipelineFrame)),
}


def kinds(members: list[type[BaseModel]]) -> dict[str, type[BaseModel]]:
    return {m.model_fields["kind"].default: m for m in members}


def walk(value: Any) -> list[Any]:
    """`value` and every model, list and dict inside it."""
    out, todo = [], [value]
    while todo:
        item = todo.pop()
        out.append(item)
        if isinstance(item, BaseModel):
            todo += [getattr(item, name) for name in type(item).model_fields]
        elif isinstance(item, list | tuple):
            todo += list(item)
        elif isinstance(item, dict):
            todo += list(item.values())
    return out


def assert_bounded(frame: BaseModel) -> None:
    """Nothing a frame announces sizes an allocation past the static bounds."""
    for item in walk(frame):
        if isinstance(item, pipeline.TensorSpec):
            assert all(d >= 0 for d in item.shape) and item.nbytes <= pipeline.MAX_TENSOR_BYTES
        if isinstance(item, pipeline.Attach):
            assert item.num_blocks <= pipeline.MAX_KV_TOKENS
            assert item.block_size <= pipeline.MAX_BLOCK_SIZE


def decode_or_refuse(name: str, doc: Any, model: type[BaseModel] | None) -> None:
    codec, members = UNIONS[name]
    try:
        frame = codec.decode(json.dumps(doc).encode())
    except FrameError as exc:
        # A frame of a known kind that fails names its field (or the unknown one sent);
        # anything else is refused as a frame.
        if model is None:
            assert re.match(r"invalid frame \(\d+ errors\): [\w.]+: ", str(exc)), str(exc)
        else:
            assert fz.error_names_field(str(exc), fz.field_names(model) | fz.keys_in(doc)), str(exc)
        return
    assert isinstance(frame, tuple(members))
    assert_bounded(frame)
    header, again = codec.encode(frame)  # what we accept we can send on
    assert codec.payload_length(header) == len(again)
    assert isinstance(codec.decode(again), type(frame))


@pytest.mark.parametrize("name", sorted(UNIONS))
@fz.fuzz(700)
@given(data=st.data())
def test_documents_shaped_like_frames(name: str, data: st.DataObject) -> None:
    members = UNIONS[name][1]
    model = data.draw(st.sampled_from(members))
    doc = data.draw(fz.documents(model))
    known = kinds(members).get(doc.get("kind")) if isinstance(doc.get("kind"), str) else None
    decode_or_refuse(name, doc, known)


@pytest.mark.parametrize("name", sorted(UNIONS))
@fz.fuzz(250)
@given(value=fz.json_values)
def test_any_json(name: str, value: Any) -> None:
    kind = value.get("kind") if isinstance(value, dict) else None
    known = kinds(UNIONS[name][1]).get(kind) if isinstance(kind, str) else None
    decode_or_refuse(name, value, known)


@pytest.mark.parametrize("name", sorted(UNIONS))
@fz.fuzz(250)
@given(payload=st.binary(max_size=64))
def test_any_bytes(name: str, payload: bytes) -> None:
    try:
        UNIONS[name][0].decode(payload)
    except FrameError as exc:
        assert "invalid frame" in str(exc)


@fz.fuzz(200)
@given(header=st.binary(max_size=12) | st.integers(0, 2**64 - 1).map(HEADER.pack))
def test_any_header(header: bytes) -> None:
    codec = pipeline.CODEC
    try:
        length = codec.payload_length(header)
    except FrameError:
        assert (
            len(header) != HEADER_BYTES
            or HEADER.unpack(header)[0] in range(0, 1)
            or (HEADER.unpack(header)[0] > codec.max_bytes)
        )
        return
    assert 0 < length <= codec.max_bytes
