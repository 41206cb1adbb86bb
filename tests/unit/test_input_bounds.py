"""Fields that size an allocation are refused past their bounds, by name, before anything
is allocated (issue 13): transport frames, manifests, pipeline sessions, request and
control bodies. The fuzz suites (test_fuzz_*) check the same at random; these are the
cases named in the issue and the crashes found on the way."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from cascade_gateway.api_request import Limits, parse_completion
from cascade_gateway.errors import OpenAIError
from cascade_protocol import limits
from cascade_protocol.control import ServeRequest
from cascade_protocol.generate import GenerateRequest, SamplingParams
from cascade_worker.blocks.manifest import BlockManifest, ModelManifest, TensorEntry, check_fits
from cascade_worker.control.errors import RequestError, parse_body
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.sampling import SamplerState
from cascade_worker.multicast import frames as multicast
from cascade_worker.pipeline.bounds import check_attach, check_result, check_work, max_cache_tokens
from cascade_worker.pipeline.frames import CODEC, Attach, BatchMeta, TensorSpec, Work
from cascade_worker.transport.frames import FrameError

CONFIG = ModelConfig.from_hf({
    "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
    "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 300,
    "max_position_embeddings": 256,
})  # fmt: skip


def attach(num_blocks: int, block_size: int = 16) -> Attach:
    return Attach(session="s", stage=1, model="m", block_size=block_size, num_blocks=num_blocks)


def test_tensor_specs_refuse_negative_and_huge_shapes() -> None:
    with pytest.raises(ValidationError, match="shape"):
        TensorSpec(dtype="float32", shape=(10**12,))
    with pytest.raises(ValidationError, match="shape"):
        TensorSpec(dtype="int64", shape=(-1, 4))
    assert TensorSpec(dtype="float32", shape=(4096, 152064)).nbytes < 1 << 32  # real logits


def test_an_attach_for_a_quadrillion_kv_slots_is_refused_by_name() -> None:
    raw = attach(1).model_dump() | {"num_blocks": 10**15}
    with pytest.raises(FrameError, match=r"attach\.num_blocks"):
        CODEC.decode(json.dumps(raw).encode())


def test_a_stage_bounds_the_kv_cache_by_its_model() -> None:
    """What a head sizes (engine.sizing.cache_config) fits; a block more than that does not."""
    tokens = max_cache_tokens(CONFIG)
    blocks = -(-tokens // 16) + 1
    assert check_attach(attach(blocks), CONFIG) == CacheConfig(16, blocks)
    with pytest.raises(FrameError, match=r"attach\.num_blocks: \d+ blocks"):
        check_attach(attach(blocks + 1), CONFIG)
    assert tokens >= CONFIG.max_position_embeddings  # always one full context


def work(shape: tuple[int, ...], **batch: object) -> Work:
    meta = {"seq_ids": [1, 2], "start_positions": [0, 8], "num_new": [3, 1],
            "block_tables": [[0], [1, 2]]} | batch  # fmt: skip
    tensor = TensorSpec(dtype="float32", shape=shape)
    return Work(step=0, batch=BatchMeta.model_validate(meta), tensor=tensor)


def test_work_must_fit_the_session_cache_and_carry_its_tokens() -> None:
    cache = CacheConfig(16, 4)
    check_work(work((4, 64)), cache, hidden=64)
    check_work(work((4,)), cache, hidden=64)  # token ids, for a stage starting at layer 0
    with pytest.raises(FrameError, match=r"work\.tensor\.shape"):
        check_work(work((4000, 64)), cache, hidden=64)  # more tokens than the batch has
    with pytest.raises(FrameError, match=r"work\.batch.block_tables"):
        check_work(work((4, 64), block_tables=[[0], [1, 9]]), cache, hidden=64)
    with pytest.raises(FrameError, match=r"work\.batch: a sequence of 1000 tokens"):
        check_work(work((1001, 64), start_positions=[0, 0], num_new=[1000, 1]), cache, 64)
    with pytest.raises(FrameError, match=r"work\.batch: .* differ in length"):
        check_work(work((4, 64), seq_ids=[1]), cache, hidden=64)


def test_results_must_answer_a_pending_step() -> None:
    check_result(TensorSpec(dtype="float32", shape=(2, 300)), rows=2, vocab=300)
    with pytest.raises(FrameError, match=r"result\.step"):
        check_result(TensorSpec(dtype="float32", shape=(2, 300)), rows=None, vocab=300)
    with pytest.raises(FrameError, match=r"result\.tensor"):
        check_result(TensorSpec(dtype="float32", shape=(2000, 300)), rows=2, vocab=300)
    with pytest.raises(FrameError, match=r"result\.tensor\.shape"):
        check_result(TensorSpec(dtype="float32", shape=(2, 3000)), rows=2, vocab=300)


def test_multicast_block_lists_are_bounded() -> None:
    raw = {"kind": "fetch", "node": "n", "blocks": [10**15]}
    with pytest.raises(FrameError, match=r"fetch\.blocks"):
        multicast.CODEC.decode(json.dumps(raw).encode())


def test_manifests_are_consistent_and_must_fit_the_host() -> None:
    entry = {"name": "w", "dtype": "float32", "shape": (4, 4), "offset": 0, "nbytes": 64}
    with pytest.raises(ValidationError, match="nbytes"):
        TensorEntry.model_validate(entry | {"nbytes": 10**15})
    block = {"index": 0, "layer_start": 0, "layer_end": 1, "nbytes": 64, "checksum": "c",
             "sha256": "0" * 64, "tensors": [entry]}  # fmt: skip
    with pytest.raises(ValidationError, match="tensors"):
        BlockManifest.model_validate(block | {"nbytes": 32})
    doc = {"digest": "d", "arch": "a", "num_layers": 1, "config": {}, "blocks": [block]}
    with pytest.raises(ValidationError, match="blocks"):
        ModelManifest.model_validate(doc | {"blocks": [block | {"index": 3}]})
    manifest = ModelManifest.model_validate(doc)
    check_fits(manifest)
    with pytest.raises(ValueError, match=r"manifest\.blocks: 64 bytes"):
        check_fits(manifest, limit=63)


def test_seeds_torch_cannot_take_are_refused_not_crashed_on() -> None:
    """Found while bounding: seed 2**64 passed validation and raised in the engine."""
    for seed in (limits.MIN_SEED, limits.MAX_SEED):
        SamplerState.from_params(SamplingParams(seed=seed))
    with pytest.raises(ValidationError, match="seed"):
        SamplingParams(seed=2**64)


def test_request_bodies_are_bounded_by_name() -> None:
    with pytest.raises(ValidationError, match="max_tokens"):
        GenerateRequest(request_id="r", prompt="p", params={"max_tokens": 10**15})
    with pytest.raises(ValidationError, match="prompt_token_ids"):
        GenerateRequest(request_id="r", prompt_token_ids=[2**31])
    for field, value in (("max_tokens", 10**15), ("n", 10**9), ("stop", ["x"] * 17),
                         ("stop_token_ids", [1] * 257), ("seed", 2**64)):  # fmt: skip
        with pytest.raises(OpenAIError) as exc:
            parse_completion({"model": "m", "prompt": "p", field: value}, None,
                             Limits(models=frozenset()), "r")  # fmt: skip
        assert (exc.value.status, exc.value.param) == (400, field)


def test_control_bodies_are_bounded_by_name() -> None:
    with pytest.raises(RequestError, match="maxBatch"):
        parse_body(ServeRequest, b'{"maxBatch": 1000000000}')
    with pytest.raises(RequestError, match="maxModelLen"):
        parse_body(ServeRequest, b'{"maxModelLen": 1000000000}')
    with pytest.raises(RequestError, match="layers"):
        parse_body(ServeRequest, b'{"layers": [-1, 1000000000]}')
