"""Benches that call workers directly (capacity, cold start) do it as the gateway does:
with the deployment's peer token, read from the Secret the operator made."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from kubernetes.client.exceptions import ApiException

from cascade_protocol.peer_auth import SECRET_KEY, TokensByHost, secret_name

_TOKENS = TokensByHost()


def read_token(core: Any, namespace: str, deployment: str) -> str | None:
    """The deployment's peer token, or None while the operator has not made it."""
    try:
        secret = core.read_namespaced_secret(secret_name(deployment), namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    raw = (secret.data or {}).get(SECRET_KEY)
    return base64.b64decode(raw).decode() if raw else None


def authorize(core: Any, namespace: str, deployment: str, ips: Iterable[str | None]) -> None:
    """Requests to these pods carry their deployment's token."""
    token = read_token(core, namespace, deployment)
    if token:
        _TOKENS.authorize(ips, token)


def headers_for(url: str) -> dict[str, str]:
    return _TOKENS.headers_for(url)
