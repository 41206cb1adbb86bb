"""`cascade dev up` flags reach the cluster options (nothing is started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cascade_cli.main import main
from cascade_dev import cluster


def test_node_cpu_reaches_up_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[cluster.UpOptions] = []

    def fake_up(paths: Any, opts: cluster.UpOptions) -> Any:
        seen.append(opts)
        return cluster.plan_cluster(opts.nodes, node_cpu=opts.node_cpu)

    monkeypatch.setattr(cluster, "up", fake_up)
    state = str(tmp_path)
    assert main(["dev", "--state-dir", state, "up", "--nodes", "2", "--node-cpu", "0.5"]) == 0
    assert main(["dev", "--state-dir", state, "up", "--nodes", "2"]) == 0
    assert [o.node_cpu for o in seen] == [0.5, None]


@pytest.mark.parametrize("bad", ["0", "-1", "0.001", "half"])
def test_bad_node_cpu_is_refused_while_parsing(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["dev", "up", "--node-cpu", bad])
    assert exc.value.code == 2
    assert "--node-cpu" in capsys.readouterr().err
