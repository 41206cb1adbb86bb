"""The deployment's peer token (cascade_protocol.peer_auth): bearer headers and proofs."""

from __future__ import annotations

import pytest

from cascade_protocol import peer_auth as pa

TOKEN = pa.new_token()


def test_tokens_are_fresh_and_long() -> None:
    assert pa.new_token() != TOKEN and len(TOKEN) >= 43


def test_bearer_header_matches_only_its_token() -> None:
    header = pa.bearer_headers(TOKEN)[pa.AUTH_HEADER]
    assert pa.bearer_matches(header, TOKEN)
    assert not pa.bearer_matches(header, pa.new_token())
    for bad in (None, "", TOKEN, f"Basic {TOKEN}", "Bearer ", f"Bearer {'x' * 600}"):
        assert not pa.bearer_matches(bad, TOKEN), bad
    assert pa.bearer_headers(None) == {}


def test_a_proof_is_bound_to_token_purpose_peer_and_time() -> None:
    now = 1_800_000_000.0
    proof = pa.prove(TOKEN, pa.MULTICAST, "w-1", now)
    assert TOKEN not in proof.model_dump_json()  # the token never travels
    assert pa.refusal(TOKEN, proof, pa.MULTICAST, "w-1", now + 5) is None
    assert pa.refusal(pa.new_token(), proof, pa.MULTICAST, "w-1", now) == "wrong credentials"
    assert pa.refusal(TOKEN, proof, pa.PIPELINE, "w-1", now) == "wrong credentials"
    assert pa.refusal(TOKEN, proof, pa.MULTICAST, "w-2", now) == "wrong credentials"
    stale = pa.refusal(TOKEN, proof, pa.MULTICAST, "w-1", now + pa.PROOF_WINDOW_S + 1)
    assert stale is not None and "outside" in stale
    assert pa.refusal(TOKEN, None, pa.MULTICAST, "w-1", now) == "no credentials"
    forged = proof.model_copy(update={"at": now + 1})  # same mac, another time
    assert pa.refusal(TOKEN, forged, pa.MULTICAST, "w-1", now) == "wrong credentials"


def test_an_open_process_accepts_anything_and_proves_nothing() -> None:
    assert pa.check(None, None, pa.PIPELINE, "s") is None
    assert pa.prove_or_none(None, pa.PIPELINE, "s") is None
    key = pa.PeerKey(TOKEN)
    assert pa.check(key, pa.prove_or_none(key, pa.PIPELINE, "s"), pa.PIPELINE, "s") is None
    assert pa.check(key, None, pa.PIPELINE, "s") == "no credentials"


def test_key_from_env() -> None:
    assert pa.key_from_env({}) is None
    assert pa.key_from_env({pa.TOKEN_ENV: "  "}) is None
    key = pa.key_from_env({pa.TOKEN_ENV: TOKEN})
    assert key is not None and key.header_ok(key.headers[pa.AUTH_HEADER])
    with pytest.raises(ValueError, match="peer token"):
        pa.PeerKey("x" * (pa.MAX_TOKEN_CHARS + 1))
    assert TOKEN not in repr(key)


def test_the_pod_reads_the_token_from_its_deployments_secret() -> None:
    env = pa.token_env("llama")
    assert env == {
        "name": pa.TOKEN_ENV,
        "valueFrom": {"secretKeyRef": {"name": "llama-cascade-peer", "key": pa.SECRET_KEY}},
    }


def test_requests_carry_the_token_of_the_pods_deployment() -> None:
    tokens = pa.TokensByHost()
    tokens.authorize(["10.0.0.1", None, "fd00::5"], TOKEN)
    assert tokens.headers_for("http://10.0.0.1:8080/v1/generate") == pa.bearer_headers(TOKEN)
    assert tokens.headers_for("http://[fd00::5]:8080/v1/load") == pa.bearer_headers(TOKEN)
    assert tokens.headers_for("http://10.0.0.2:8080/v1/generate") == {}
