"""Who may talk to a deployment's workers: one shared secret per ModelDeployment.

The operator creates the secret (a Kubernetes Secret named by `secret_name`) with two
tokens: the peer token (key `SECRET_KEY`, $CASCADE_PEER_TOKEN) for the operator and the
deployment's workers and host copies, and the generate token (key `GENERATE_KEY`,
$CASCADE_GENERATE_TOKEN) for its gateway, which may only generate and read load: a
compromised gateway cannot drive the workers' control API. With them:

- HTTP (operator -> worker control, gateway -> worker generate/load): the token as a
  bearer credential (`bearer_headers`, checked with `bearer_matches`);
- UCX (worker <-> worker: multicast Hello/Attach/Fetch, pipeline Attach/Feed): the frame
  that opens a connection carries a `PeerProof`, an HMAC of the token over what the
  connection is for, who opens it and when, so the token itself never crosses the wire
  and a captured proof is good only for that peer's name and `PROOF_WINDOW_S`.

What this does and does not protect is written down in docs/security.md (threat model).
Pure: no I/O, so both ends and the tests share one definition.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
import urllib.parse
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field

TOKEN_ENV = "CASCADE_PEER_TOKEN"
SECRET_KEY = "token"
GENERATE_TOKEN_ENV = "CASCADE_GENERATE_TOKEN"
GENERATE_KEY = "generate"
AUTH_HEADER = "Authorization"
SCHEME = "Bearer"
# Clocks of a cluster's nodes agree to well under a minute (NTP); a proof older or newer
# than this is refused, which bounds how long a captured one can be replayed.
PROOF_WINDOW_S = 120.0
MAX_TOKEN_CHARS = 512

# What a proof is for: a multicast proof cannot open a pipeline stage, and back.
MULTICAST = "multicast"
PIPELINE = "pipeline"


def secret_name(deployment: str) -> str:
    """The Secret holding a ModelDeployment's peer token (owned by it)."""
    return f"{deployment}-cascade-peer"


def token_env(deployment: str, generate: bool = False) -> dict[str, object]:
    """A pod's $CASCADE_PEER_TOKEN (or, `generate`, $CASCADE_GENERATE_TOKEN) entry: from
    the deployment's Secret (the kubelet resolves it; no token is in the pod spec)."""
    key, env = (GENERATE_KEY, GENERATE_TOKEN_ENV) if generate else (SECRET_KEY, TOKEN_ENV)
    return {
        "name": env,
        "valueFrom": {"secretKeyRef": {"name": secret_name(deployment), "key": key}},
    }


def new_token() -> str:
    """A fresh 256-bit token, URL-safe text."""
    return secrets.token_urlsafe(32)


def bearer_headers(token: str | None) -> dict[str, str]:
    """The header that authenticates an HTTP request to a worker ({} without a token)."""
    return {AUTH_HEADER: f"{SCHEME} {token}"} if token else {}


class TokensByHost:
    """Which token an HTTP request to a pod carries: its deployment's, looked up by the
    pod's IP (the operator's worker client, tests and benches that call workers)."""

    def __init__(self) -> None:
        self._tokens: dict[str, str] = {}

    def authorize(self, hosts: Iterable[str | None], token: str) -> None:
        """Requests to these pod IPs carry `token` from now on."""
        self._tokens.update({host: token for host in hosts if host})

    def headers_for(self, url: str) -> dict[str, str]:
        """The bearer header for `url` ({} for a host not authorized)."""
        return bearer_headers(self._tokens.get(urllib.parse.urlsplit(url).hostname or ""))


def bearer_matches(header: str | None, token: str) -> bool:
    """Does an Authorization header carry `token`? Constant-time in the token."""
    scheme, _, given = (header or "").partition(" ")
    if scheme != SCHEME or not given or len(given) > MAX_TOKEN_CHARS:
        return False
    return hmac.compare_digest(given.encode(), token.encode())


class PeerProof(BaseModel):
    """Proof that the peer opening a UCX connection holds the deployment's token."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: float = Field(description="Unix time the proof was made.")
    mac: str = Field(min_length=64, max_length=64, description="HMAC-SHA256, hex.")


def _mac(token: str, purpose: str, who: str, at: float) -> str:
    msg = f"{purpose}|{who}|{at:.3f}".encode()
    return hmac.new(token.encode(), msg, hashlib.sha256).hexdigest()


def prove(token: str, purpose: str, who: str, now: float | None = None) -> PeerProof:
    at = round(time.time() if now is None else now, 3)
    return PeerProof(at=at, mac=_mac(token, purpose, who, at))


def refusal(
    token: str,
    proof: PeerProof | None,
    purpose: str,
    who: str,
    now: float | None = None,
    window_s: float = PROOF_WINDOW_S,
) -> str | None:
    """Why a connection opened by `who` with `proof` is refused, or None to accept it."""
    if proof is None:
        return "no credentials"
    now = time.time() if now is None else now
    if abs(now - proof.at) > window_s:
        return f"proof made {now - proof.at:+.0f} s from now, outside +-{window_s:g} s"
    if not hmac.compare_digest(proof.mac, _mac(token, purpose, who, proof.at)):
        return "wrong credentials"
    return None


class PeerKey:
    """A process's copy of the token: makes proofs for what it opens and checks those
    that arrive. `None` in place of a key means open (library use and unit tests)."""

    def __init__(self, token: str) -> None:
        if not token or len(token) > MAX_TOKEN_CHARS:
            raise ValueError(f"a peer token must be 1-{MAX_TOKEN_CHARS} characters")
        self._token = token

    def prove(self, purpose: str, who: str) -> PeerProof:
        return prove(self._token, purpose, who)

    def refusal(self, proof: PeerProof | None, purpose: str, who: str) -> str | None:
        return refusal(self._token, proof, purpose, who)

    def header_ok(self, header: str | None) -> bool:
        return bearer_matches(header, self._token)

    @property
    def headers(self) -> dict[str, str]:
        return bearer_headers(self._token)


def key_from_env(env: Mapping[str, str] | None = None, name: str = TOKEN_ENV) -> PeerKey | None:
    """The key in $CASCADE_PEER_TOKEN, or None when it is unset or empty."""
    token = (os.environ if env is None else env).get(name, "").strip()
    return PeerKey(token) if token else None


def prove_or_none(key: PeerKey | None, purpose: str, who: str) -> PeerProof | None:
    return key.prove(purpose, who) if key is not None else None


def check(key: PeerKey | None, proof: PeerProof | None, purpose: str, who: str) -> str | None:
    """`PeerKey.refusal`, or None (accept) for an open process."""
    return key.refusal(proof, purpose, who) if key is not None else None
