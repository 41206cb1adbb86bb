"""One typed GET for the operator's HTTP clients (workers' and gateways' pod APIs).

Both read a pod's JSON document and parse it into a shared protocol message; a pod that
cannot be reached, answers anything but 200, or answers something that does not parse is
unknown this tick (`None`), and the next tick asks again. Short timeouts, no retries.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import TypeVar

from pydantic import BaseModel, ValidationError

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


def pod_url(ip: str, port: int, path: str) -> str:
    host = f"[{ip}]" if ":" in ip else ip  # IPv6 literals need brackets
    return f"http://{host}:{port}{path}"


def get_typed(
    url: str, model: type[M], timeout_s: float, headers: dict[str, str] | None = None
) -> M | None:
    """GET `url` parsed as `model`, or None (unreachable, not 200, or not parsing)."""
    try:
        req = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            if resp.status != 200:
                return None
            doc = json.loads(resp.read() or b"null")
    except (OSError, ValueError) as err:  # HTTPError and URLError are OSErrors
        log.debug("GET %s: %s", url, err)
        return None
    try:
        return model.model_validate(doc)
    except ValidationError as err:
        log.warning("%s answered a %s that does not parse: %s", url, model.__name__, err)
        return None
