"""The node agent's fault injection: nodes listed in its `silence` file get no heartbeat
(tests/integration/test_node_loss.py), and `DevCluster.silence_node` edits that list."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from cascade_dev.nodeagent.heartbeat import Heartbeat
from cascade_dev.testing import DevCluster


class Api:
    """Records the heartbeat's requests; every node exists."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def get(self, path: str) -> dict[str, Any]:
        return {"metadata": {"uid": "u"}, "spec": {}}

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.paths.append(path)
        return {"metadata": {"uid": "u"}}


class Spec:
    def __init__(self, name: str) -> None:
        self.name = name


def test_silenced_nodes_get_no_lease_renewal(tmp_path: Path) -> None:
    dev = DevCluster.at(tmp_path, 2)
    (tmp_path / "nodeagent").mkdir()
    dev.silence_node("n1")
    dev.silence_node("n0")
    dev.silence_node("n0", silent=False)
    silence = tmp_path / "nodeagent" / "silence"
    assert silence.read_text().split() == ["n1"]
    api, stop = Api(), threading.Event()
    nodes: list[Any] = [Spec("n0"), Spec("n1")]  # the heartbeat reads only their names
    beat = Heartbeat(api, nodes, fabric=None, stop=stop, silence=silence)  # type: ignore[arg-type]
    assert beat.silenced() == {"n1"}
    beat.beat(1)  # one lease period
    assert [p.rsplit("/", 1)[-1] for p in api.paths] == ["n0"]
    silence.unlink()
    api.paths.clear()
    beat.beat(2)
    assert [p.rsplit("/", 1)[-1] for p in api.paths] == ["n0", "n1"]
