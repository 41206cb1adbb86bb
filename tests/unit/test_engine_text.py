"""Engine-side text: tokenizer loading, chat templates, incremental detokenizing, stops."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engine_harness import make_model

from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.output import TextStream, held_back
from cascade_worker.engine.tokenizer import EngineTokenizer, IncrementalDetokenizer

TEXTS = [
    "Hello, world! ünïcödé 🙂 🇩🇪 日本語のテキスト and code: def f(x): return x + 1\n",
    "emoji only 👩‍👩‍👧‍👦👍🏽",
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model(tmp_path_factory.mktemp("tok"), "llama", layers=1)


@pytest.fixture(scope="module")
def tok(model_dir: Path) -> EngineTokenizer:
    loaded = EngineTokenizer.from_model_dir(model_dir)
    assert loaded is not None
    return loaded


def test_loads_from_store_extras_like_from_dir(model_dir: Path, tok: EngineTokenizer) -> None:
    store = BlockStore.from_model_dir(model_dir, 1)
    from_store = EngineTokenizer.from_extras(store.manifest.extras)
    assert from_store is not None
    assert from_store.encode(TEXTS[0]) == tok.encode(TEXTS[0])
    assert tok.encode("hi")[0] == 1 and tok.eos_token_id == 2  # BOS prepended
    assert EngineTokenizer.from_extras({}) is None


@pytest.mark.parametrize("text", TEXTS)
def test_incremental_detokenizer_never_emits_partial_characters(
    tok: EngineTokenizer, text: str
) -> None:
    ids = tok.encode(text, add_special_tokens=False)
    detok = IncrementalDetokenizer(tok)
    deltas = [detok.add(t) for t in ids]
    deltas.append(detok.flush())
    assert "".join(deltas) == text == tok.decode(ids)
    assert all("\ufffd" not in d for d in deltas)
    assert any(d == "" for d in deltas)  # multi-token characters were held back


def test_flush_gives_up_incomplete_bytes(tok: EngineTokenizer) -> None:
    ids = tok.encode("🙂", add_special_tokens=False)
    detok = IncrementalDetokenizer(tok)
    assert [detok.add(t) for t in ids[:-1]] == [""] * (len(ids) - 1)
    assert detok.flush() == tok.decode(ids[:-1])  # replacement character(s)


def test_held_back() -> None:
    assert held_back("abc", ["cd"]) == 1
    assert held_back("abcd", ["cde", "bcdx"]) == 3
    assert held_back("abc", ["xyz", ""]) == 0
    assert held_back("ab", ["abc"]) == 2


def test_text_stream_stop_strings_across_tokens(tok: EngineTokenizer) -> None:
    text = "one two three four"
    ids = tok.encode(text, add_special_tokens=False)
    stream = TextStream(IncrementalDetokenizer(tok), ["three", "zzz"])
    out = []
    for t in ids:
        stopped = stream.add(t)
        out.append(stream.take(final=stopped))
        assert "thr" not in "".join(out)  # a stop-string prefix is never streamed early
        if stopped:
            break
    assert stopped and "".join(out) == "one two "
    plain = TextStream(IncrementalDetokenizer(tok), [])
    assert not any(plain.add(t) for t in ids)
    assert plain.take(final=True) == text


def test_chat_template_matches_transformers(model_dir: Path, tok: EngineTokenizer) -> None:
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi 🙂"},
    ]
    rendered = tok.render_chat(messages)
    assert rendered.startswith("<s><|system|>\n") and rendered.endswith("<|assistant|>\n")
    os.environ["HF_HUB_OFFLINE"] = "1"
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(model_dir)
    assert rendered == hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    expected = hf.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    if isinstance(expected, dict) or hasattr(expected, "keys"):
        expected = expected["input_ids"]
    assert tok.encode_chat(messages) == list(expected)


def test_no_template_is_an_error(tok: EngineTokenizer) -> None:
    bare = EngineTokenizer(tok._tok.to_str(), {"eos_token": {"content": "</s>"}})
    assert bare.eos_token_id == 2
    with pytest.raises(ValueError, match="chat template"):
        bare.render_chat([{"role": "user", "content": "x"}])
