"""The deployment's peer token as a Kubernetes Secret: the one the operator keeps, and
reading it back (pure; the controller does the I/O; pods read it through
`peer_auth.token_env`).

One random token per ModelDeployment (cascade_protocol.peer_auth says how it is used);
the Secret is owned by the deployment, so it goes when the deployment does, and it is
created once and never rewritten, so running pods keep a token that still works.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cascade_operator.builders import labels, owner_reference
from cascade_operator.observed import MdRef
from cascade_protocol.peer_auth import GENERATE_KEY, SECRET_KEY, new_token, secret_name

Manifest = dict[str, Any]


def peer_secret(ref: MdRef, token: str | None = None) -> Manifest:
    """A new Secret holding a fresh peer token (or `token`) and a fresh generate token."""
    value = token if token is not None else new_token()
    generate = new_token()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": secret_name(ref.name),
            "namespace": ref.namespace,
            "labels": labels(ref.name, "peer-token"),
            "ownerReferences": [owner_reference(ref)],
        },
        "data": {
            SECRET_KEY: base64.b64encode(value.encode()).decode(),
            GENERATE_KEY: base64.b64encode(generate.encode()).decode(),
        },
    }


def token_of(secret: Manifest | None, key: str = SECRET_KEY) -> str | None:
    """The token a stored Secret holds under `key`, or None when none decodes."""
    raw = ((secret or {}).get("data") or {}).get(key)
    if not raw:
        return None
    try:
        return base64.b64decode(raw, validate=True).decode() or None
    except (binascii.Error, UnicodeDecodeError):
        return None
