"""Run the calling thread on the node's accelerator: the dev cluster's emulation of one.

On the dev cluster a node's CPU quota stands for its GPU. The node agent names the
quota group's thread list in $CASCADE_ACCELERATOR_TASKS (cgroup v1) and the worker's
compute threads (the engine's step loop, a pipeline stage's forward) put themselves
there, so the engine is held to the node's capacity while receiving and forwarding
blocks, HTTP and the pipeline's wire run on the host's cores beside it, as a GPU node's
NIC and CPUs do. Without the variable (a real GPU node, v2 hosts, tests) it does nothing.

Building an engine is accelerator work too (weights to the device, the KV profile's
forward pass), so it runs on `on_builder`'s thread, in the group. On the host's cores it
starved the transfers beside it: on `cascade bench scaleup` two targets built their
engines (2.8 s each instead of 0.5) while a third received, and 6.6 MiB plans measured
up to 1.29x their predictions.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from cascade_api.constants import ACCELERATOR_TASKS_ENV

log = logging.getLogger(__name__)

T = TypeVar("T")
_BUILDER: list[ThreadPoolExecutor] = []
_BUILDER_LOCK = threading.Lock()


def enter() -> bool:
    """Move the calling thread into the accelerator group; True when it moved. A
    failure is logged and the thread runs on the host's cores (never fatal)."""
    tasks = os.environ.get(ACCELERATOR_TASKS_ENV)
    if not tasks:
        return False
    tid = threading.get_native_id()
    try:
        Path(tasks).write_text(f"{tid}\n")
    except OSError as exc:
        log.warning("thread %s stays off the accelerator group %s: %s", tid, tasks, exc)
        return False
    log.info("thread %s (%s) runs under %s", tid, threading.current_thread().name, tasks)
    return True


async def on_builder(work: Callable[[], T]) -> T:
    """`work()` on the process's one thread for accelerator start-up work (engine
    builds, loading the whole model to switch to local execution), in the group."""
    with _BUILDER_LOCK:
        if not _BUILDER:
            _BUILDER.append(ThreadPoolExecutor(1, "accelerator-build", enter))
    return await asyncio.get_running_loop().run_in_executor(_BUILDER[0], work)
