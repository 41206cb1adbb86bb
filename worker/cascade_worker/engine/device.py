"""Where the engine computes, decided once as the worker starts.

The pod's ask (`spec.engine.device`: auto, cuda or cpu, in $CASCADE_DEVICE), what it was
given ($CASCADE_GPUS, the instance's GPU count) and what torch finds decide it
(`choose_device`, pure). `auto` is CUDA when the pod was given GPUs and CUDA is there,
else the CPU. A pod that asked for GPUs or for `cuda` and finds no CUDA device fails its
start (`DeviceUnavailable`, naming the pod, the ask and what was found) instead of
serving on the CPU unnoticed, unless its node declares itself an emulation
($CASCADE_NODE_EMULATION, set by the dev cluster's node agent), where GPUs are played by
CPU quotas. torch is imported only to look (`probe`, `describe`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cascade_protocol.status import DeviceInfo

if TYPE_CHECKING:
    import torch

ASKS = ("auto", "cuda", "cpu")  # and cuda:N


class DeviceUnavailable(RuntimeError):
    """The pod asked for an accelerator this process cannot find."""


@dataclass(frozen=True)
class Found:
    """What this process sees of CUDA."""

    cuda_devices: int  # torch.cuda.device_count(); 0 without CUDA
    torch_cuda: str | None  # torch.version.cuda: None for a CPU-only build of torch
    visible: str | None  # $CUDA_VISIBLE_DEVICES as the process got it

    def describe(self) -> str:
        build = f"a CUDA {self.torch_cuda} build" if self.torch_cuda else "a CPU-only build"
        visible = "unset" if self.visible is None else repr(self.visible)
        devices = f"{self.cuda_devices} CUDA device(s)"
        return f"torch is {build}, {devices}, CUDA_VISIBLE_DEVICES {visible}"


def choose_device(
    asked: str, gpus: int, look: Callable[[], Found], *, emulated: bool, pod: str
) -> str:
    """The torch device name the engine uses ("cuda:0", "cpu"); DeviceUnavailable where
    the pod wants CUDA and has none, ValueError for an ask that is no device. `look`
    (`probe`) runs only where CUDA is wanted: a CPU pod, or a GPU pod on an emulating
    node, does not wait for torch before it listens."""
    asked = (asked or "auto").strip().lower()
    index = asked.removeprefix("cuda:") if asked.startswith("cuda:") else None
    if asked not in ASKS and not (index is not None and index.isdigit()):
        raise ValueError(f"engine.device: {asked!r} is not one of auto, cuda, cuda:N, cpu")
    if asked == "cpu" or (asked == "auto" and (gpus <= 0 or emulated)):
        return "cpu"  # an emulating node's GPUs are CPU quotas: no need to look (torch)
    found = look()
    if found.cuda_devices > 0:
        n = int(index) if index is not None else 0
        if n >= found.cuda_devices:
            raise DeviceUnavailable(
                f"pod {pod}: engine.device {asked!r}, but it sees {found.cuda_devices} CUDA "
                f"device(s) ({found.describe()})"
            )
        return f"cuda:{n}"
    if emulated:
        return "cpu"  # the node plays its GPUs with CPU quotas (the dev cluster)
    raise DeviceUnavailable(
        f"pod {pod}: engine.device {asked!r} with {gpus} GPU(s) requested, but {found.describe()}; "
        "the node gives this container no usable GPU (a device plugin, the NVIDIA container "
        "runtime, or a runtimeClassName it needs), or set engine.device: cpu"
    )


def probe() -> Found:
    import torch

    return Found(
        cuda_devices=torch.cuda.device_count() if torch.cuda.is_available() else 0,
        torch_cuda=torch.version.cuda,
        visible=os.environ.get("CUDA_VISIBLE_DEVICES"),
    )


def torch_device(name: str | torch.device) -> torch.device:
    """A torch device with its index ("cuda" -> cuda:N, the current one): every tensor the
    engine makes names the same device, and a FakeTensorMode test can place them."""
    import torch

    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        current = torch.cuda.current_device() if torch.cuda.is_available() else 0
        return torch.device("cuda", current)
    return device


def describe(name: str, *, emulated: bool = False) -> DeviceInfo:
    """What /v1/status, the instance status and the metrics say this worker computes on;
    `emulated`: a CPU standing in for the GPUs the pod was given."""
    if name.startswith("cuda"):
        import torch

        props = torch.cuda.get_device_properties(torch_device(name))
        return DeviceInfo(kind="cuda", name=props.name, memory_bytes=props.total_memory)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return DeviceInfo(kind="cpu", name="cpu", memory_bytes=memory, emulated=emulated)
