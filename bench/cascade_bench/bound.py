"""The physical lower bound a multicast is judged against.

A receiver whose NIC takes B bytes/s cannot hold an M-byte model before M/B seconds, however
clever the plan; every method's time is reported as a ratio to that bound.
"""

from __future__ import annotations


def nic_bytes_per_s(nic_mbit: float) -> float:
    """A NIC rate in Mbit/s (10^6 bit/s, as tc counts) as bytes per second."""
    if nic_mbit <= 0:
        raise ValueError(f"NIC rate must be positive, got {nic_mbit}")
    return nic_mbit * 1_000_000 / 8


def bound_seconds(model_bytes: int, nic_mbit: float) -> float:
    """M/B: the time to push the model through one receiver's NIC at line rate."""
    if model_bytes < 0:
        raise ValueError(f"model size must be >= 0, got {model_bytes}")
    return model_bytes / nic_bytes_per_s(nic_mbit)


def ratio(seconds: float | None, bound_s: float) -> float | None:
    """A time divided by the bound (None stays None: the method did not finish)."""
    if seconds is None or bound_s <= 0:
        return None
    return seconds / bound_s


def speedup(baseline_s: float | None, seconds: float | None) -> float | None:
    """How many times faster than the baseline (None if either did not finish)."""
    if baseline_s is None or seconds is None or seconds <= 0:
        return None
    return baseline_s / seconds


def rate_mbit(nbytes: int, seconds: float) -> float:
    """Achieved goodput in Mbit/s."""
    if seconds <= 0:
        raise ValueError(f"duration must be positive, got {seconds}")
    return nbytes * 8 / seconds / 1_000_000
