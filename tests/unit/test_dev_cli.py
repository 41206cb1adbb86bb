"""`cascade dev up` flags reach the cluster options (nothing is started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cascade_cli.main import main
from cascade_dev import cluster
from cascade_dev.topology import DEFAULT_STORAGE_MBIT


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


def test_storage_rate_reaches_up_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[cluster.UpOptions] = []

    def fake_up(paths: Any, opts: cluster.UpOptions) -> Any:
        seen.append(opts)
        return cluster.plan_cluster(opts.nodes, storage_mbit=opts.storage_mbit or None)

    monkeypatch.setattr(cluster, "up", fake_up)
    state = str(tmp_path)
    for extra in ([], ["--storage-mbit", "250"], ["--storage-mbit", "0"]):
        assert main(["dev", "--state-dir", state, "up", "--nodes", "1", *extra]) == 0
    assert [o.storage_mbit for o in seen] == [DEFAULT_STORAGE_MBIT, 250, 0]
    assert cluster.UpOptions().storage_mbit == DEFAULT_STORAGE_MBIT  # as `cascade dev up`


BAD_UP_FLAGS = [
    *(("--node-cpu", bad) for bad in ("0", "-1", "0.001", "half")),
    *(("--storage-mbit", bad) for bad in ("-1", "fast", "1.5")),
]


@pytest.mark.parametrize(("flag", "bad"), BAD_UP_FLAGS)
def test_a_bad_up_flag_is_refused_while_parsing_naming_it(
    flag: str, bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["dev", "up", flag, bad])
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err
