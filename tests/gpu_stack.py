"""The GPU stack by family, for the packaging tests: which distributions a CPU-only
component (gateway, operator) must never install and the worker cannot run without."""

from __future__ import annotations

# Prefixes of canonical distribution names, by family.
GPU_STACK: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "ucx": ("ucxx", "libucx"),
    "numpy": ("numpy",),
    "nvidia": ("nvidia-",),
    "cuda": ("cuda-", "rmm", "librmm", "cupy"),
}
# What the worker's engine and transport cannot run without.
WORKER_NEEDS = ("torch", "ucx", "numpy", "nvidia")


def families(dists: set[str]) -> dict[str, list[str]]:
    """The GPU-stack families present in `dists`, with their members."""
    found: dict[str, list[str]] = {}
    for family, prefixes in GPU_STACK.items():
        members = sorted(d for d in dists if d.startswith(prefixes))
        if members:
            found[family] = members
    return found
