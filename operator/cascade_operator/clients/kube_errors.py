"""How the API client's refusals leave `clients.kube`: as `KubeRefusal` with the Status
body's reason, and the answers a call counts as success (404 gone, 409 there)."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

from kubernetes.client.exceptions import ApiException

P = ParamSpec("P")
R = TypeVar("R")


class KubeRefusal(Exception):
    """The API server refused a call; `message` is its Status body's reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message

    @classmethod
    def of(cls, err: ApiException) -> KubeRefusal:
        try:
            message = str(json.loads(err.body or "{}").get("message") or err.reason)
        except ValueError:
            message = str(err.reason)
        return cls(int(err.status or 0), message)


def refusals_as_kube_refusal(method: Callable[P, R]) -> Callable[P, R]:
    """Let an ApiException out of a Cluster method only as KubeRefusal."""

    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except ApiException as err:
            raise KubeRefusal.of(err) from err

    return call


def missing(err: ApiException) -> bool:
    return bool(err.status == 404)


@contextlib.contextmanager
def success_on(*statuses: int) -> Iterator[None]:
    """Count these answers as success: 404 (already gone), 409 (already there)."""
    try:
        yield
    except ApiException as err:
        if err.status not in statuses:
            raise
