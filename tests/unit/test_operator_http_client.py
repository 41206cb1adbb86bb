"""The operator's one typed GET: a parsed message, or None for every way a pod can fail."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from pydantic import BaseModel

from cascade_operator.clients.http import get_typed, pod_url
from cascade_operator.clients.workers import WorkerClient


class Doc(BaseModel):
    name: str


SEEN: list[str | None] = []  # Authorization headers the server saw


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        SEEN.append(self.headers.get("Authorization"))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(202)
        self.end_headers()
        self.wfile.write(b"{}")

    def do_GET(self) -> None:
        code, body = {
            "/ok": (200, {"name": "a"}),
            "/bad": (200, {"nope": 1}),
            "/missing": (404, {"error": "x"}),
            "/text": (200, "not json"),
        }[self.path]
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_get_typed_parses_or_answers_none(port: int) -> None:
    assert get_typed(pod_url("127.0.0.1", port, "/ok"), Doc, 2.0) == Doc(name="a")
    for path in ("/bad", "/missing", "/text"):
        assert get_typed(pod_url("127.0.0.1", port, path), Doc, 2.0) is None, path


def test_unreachable_pod_is_none_and_ipv6_gets_brackets() -> None:
    assert get_typed(pod_url("127.0.0.1", 9, "/ok"), Doc, 0.5) is None
    assert pod_url("fd00::1", 8080, "/v1/status") == "http://[fd00::1]:8080/v1/status"


class Order:
    def __init__(self, port: int) -> None:
        self.pod, self.address, self.path = "w-0", f"127.0.0.1:{port}", "/v1/control/serve"

    def body(self) -> dict[str, object]:
        return {}


def test_orders_carry_the_token_of_the_pods_deployment(port: int) -> None:
    client = WorkerClient()
    SEEN.clear()
    assert client.send(Order(port)).ok  # no token known for this pod: none sent
    client.authorize(["127.0.0.1", None], "t" * 43)
    assert client.send(Order(port)).status == 202
    assert SEEN == [None, "Bearer " + "t" * 43]
