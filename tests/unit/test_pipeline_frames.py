"""The pipeline protocol without a network: frames, batch metadata, tensors as bytes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.pipeline import frames as fr
from cascade_worker.pipeline.stage_process import parse_args
from cascade_worker.pipeline.wire import byte_buffer, empty, spec_of
from cascade_worker.transport.frames import FrameError

BATCH = StageBatch(
    seq_ids=[3, 7],
    start_positions=[0, 12],
    num_new=[5, 1],
    block_tables=[[0], [4, 9]],
    input=torch.zeros(6, 64),
    extra={"note": "x"},
)


def roundtrip(frame: object) -> object:
    header, payload = fr.CODEC.encode(frame)  # type: ignore[arg-type]
    assert fr.CODEC.payload_length(header) == len(payload)
    return fr.CODEC.decode(payload)


@pytest.mark.parametrize(
    "frame",
    [
        fr.Attach(session="s", stage=2, model="f", block_size=16, num_blocks=64, downstream="h:1"),
        fr.Attach(session="s", stage=3, model="f", block_size=16, num_blocks=64),
        fr.Attached(session="s", stage=1, layers=(1, 3)),
        fr.Feed(session="s", stage=0),
        fr.Work(
            step=4, batch=fr.BatchMeta.model_validate(BATCH.meta()), tensor=spec_of(BATCH.input)
        ),
        fr.Result(step=4, tensor=fr.TensorSpec(dtype="float32", shape=(2, 300))),
        fr.Failed(stage=2, step=None, error="boom"),
        fr.Detach(),
    ],
)
def test_every_frame_round_trips(frame: object) -> None:
    assert roundtrip(frame) == frame


def test_batch_metadata_rebuilds_the_stage_batch() -> None:
    work = roundtrip(
        fr.Work(
            step=0, batch=fr.BatchMeta.model_validate(BATCH.meta()), tensor=spec_of(BATCH.input)
        )
    )
    assert isinstance(work, fr.Work)
    again = StageBatch.from_meta(work.batch.model_dump(), BATCH.input)
    assert again.meta() == BATCH.meta()


@pytest.mark.parametrize(
    "payload",
    [
        b'{"kind": "work", "step": 0}',  # no batch, no tensor
        # stage 0 is the head: no stage is attached as 0
        b'{"kind": "attach", "session": "s", "stage": 0, "model": "f", '
        b'"block_size": 1, "num_blocks": 1}',
        b'{"kind": "result", "step": 0, "tensor": {"dtype": "uint8", "shape": [1]}}',
        b'{"kind": "nope"}',
    ],
)
def test_malformed_frames_are_rejected(payload: bytes) -> None:
    with pytest.raises(FrameError):
        fr.CODEC.decode(payload)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64])
def test_tensors_travel_as_bytes_of_their_storage(dtype: torch.dtype) -> None:
    source = (torch.arange(24, dtype=torch.float32).view(4, 6) - 7).to(dtype)
    spec = spec_of(source)
    assert spec.nbytes == source.numel() * source.element_size()
    sent = byte_buffer(source)
    assert isinstance(sent, np.ndarray) and sent.dtype == np.uint8
    assert sent.ctypes.data == source.data_ptr()  # a view, not a copy
    received, into = empty(spec, torch.device("cpu"))
    into[:] = sent  # what UCX does on the far side
    assert received.dtype == dtype and torch.equal(received, source)


def test_unsupported_dtypes_are_refused() -> None:
    with pytest.raises(ValueError, match="cannot send"):
        spec_of(torch.zeros(2, dtype=torch.uint8))


def test_fingerprint_tells_models_apart() -> None:
    config = ModelConfig(
        arch="llama", num_layers=4, hidden=64, heads=4, kv_heads=2, head_dim=16,
        intermediate=128, vocab=512, rope_theta=1e4, rms_norm_eps=1e-6,
        max_position_embeddings=256, attention_bias=False, tie_word_embeddings=False,
        layer_windows=(None,) * 4, eos_token_ids=(2,), bos_token_id=1, dtype="float32",
    )  # fmt: skip
    assert fr.model_fingerprint(config) == fr.model_fingerprint(dataclasses.replace(config))
    assert fr.model_fingerprint(config) != fr.model_fingerprint(
        dataclasses.replace(config, hidden=128)
    )


def test_stage_cli_arguments() -> None:
    args = parse_args(["--model-dir", "m", "--layers", "2:4", "--listen", "0.0.0.0:7000"])
    assert args.layers == (2, 4) and args.listen == "0.0.0.0:7000"
    for bad in ("4:2", "3", "a:b"):
        with pytest.raises(SystemExit):
            parse_args(["--model-dir", "m", "--layers", bad, "--listen", "h:1"])
