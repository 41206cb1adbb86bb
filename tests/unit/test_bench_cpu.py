"""CPU accounting: /proc parsing and reading a window off a trace."""

from __future__ import annotations

import pytest

from cascade_bench import cpu


def test_parse_pid_stat_handles_spaces_in_the_name() -> None:
    fields = ["S"] + ["0"] * 10 + [str(3 * cpu.TICK), str(cpu.TICK)] + ["0"] * 30
    line = "123 (python3 -m x) " + " ".join(fields)
    assert cpu.parse_pid_stat(line) == pytest.approx(4.0)


def test_parse_host_stat_counts_idle_and_iowait_as_not_busy() -> None:
    text = "cpu  100 0 50 800 50 0 10 0 0 0\ncpu0 1 2 3 4\n"
    assert cpu.parse_host_stat(text) == (160, 1010)


def trace() -> cpu.CpuTrace:
    t = cpu.CpuTrace(cpus=2)
    t.samples = [
        cpu.Sample(10.0, {"a": 1.0, "b": 1.0}, (100, 1000)),
        cpu.Sample(11.0, {"a": 1.5, "b": 1.2}, (250, 1200)),
        cpu.Sample(12.0, {"a": 2.0}, (400, 1400)),  # b has exited
        cpu.Sample(13.0, {"a": 2.1}, (420, 1600)),
    ]
    return t


def test_window_between_samples() -> None:
    w = trace().between(10.5, 11.8)
    assert w["window_s"] == 2.0  # from the sample at 10.0 to the one at 12.0
    assert w["participants_cpu_s"] == pytest.approx(1.0 + 0.2)
    assert w["max_participant_cpu_s"] == pytest.approx(1.0)
    assert w["host_busy"] == pytest.approx(300 / 400)
    assert w["host_cpus"] == 2


def test_window_outside_the_trace_clamps_to_its_ends() -> None:
    w = trace().between(0.0, 99.0)
    assert w["window_s"] == 3.0
    assert cpu.CpuTrace().between(0, 1) == {}
