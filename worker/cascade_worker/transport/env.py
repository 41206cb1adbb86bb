"""UCX environment defaults, set in exactly one place before ucxx is first imported.

UCX reads its configuration from the environment when the library initialises, so the
defaults must be in `os.environ` before `import ucxx`. Every transport module imports
ucxx through `ucx()` below, which applies them first. The user's own settings win:
a variable that is already set is never touched.

Why these defaults (measured on this project's machines, see GUIDE.md):
- `UCX_TLS=tcp,self`: TCP works everywhere (loopback, veth, real NICs); `sm,self` alone
  hangs here. Where RDMA/NVLink exist, UCX_TLS must name them explicitly: the operator
  requests an RDMA device and IPC_LOCK for GPU workers but does not set UCX_TLS yet
  (docs/security.md, "RDMA").
- `UCX_RNDV_THRESH=524289`, only together with our TCP default (a user who picks the
  transports picks this too): messages up to `EAGER_MAX_BYTES` (512 KiB, the
  multicast's default chunk) go eagerly, larger ones keep rendezvous. A rendezvous
  send waits for its receiver's reply, and in a chain that reply queues behind the
  receiver's own forwarded data on its shaped egress (up to the qdisc's 20 ms), so
  each block boundary left the wire idle. `cascade bench multicast`, chain, 100 Mbit/s,
  100 MB in 16 blocks, 1 -> 15: 1.242x M/B -> 1.137x, CPU 58% -> 53%; 1 -> 7 at 200
  Mbit/s, 200 MB: 1.130x -> 1.083x (bench/README.md, issue 15). The cost is unshaped
  loopback: 1.52 -> 0.97 GB/s (256 MB, 256 KiB chunks), where the CPU is the limit.
  Why not every message: an eager message lands in the receiver's memory before anyone
  posts a receive for it. With all of them eager, 500 strangers each sending a 1 MiB
  message grew a worker's RSS by 746 MiB (test_transport_limits); above the threshold a
  stranger's message costs the receiver nothing until it is wanted.
- `UCX_TCP_SNDBUF=131072` (same condition): a socket's send buffer bounds what waits in
  the NIC's queue. A chain forwards at line rate, so whatever a sender queued at the
  start stays queued at every hop, and queued bytes past the switch's buffer are
  dropped (a tail drop costs a 200 ms retransmission timeout). With the kernel's
  autotuned buffer (up to 4 MiB) a 512 KiB chunk reached the next hop 17 ms later than
  its store-and-forward time, and single runs stalled 0.2-0.3 s. 1 -> 15, 100 Mbit/s,
  MTU 9000: 1.114-1.117x M/B -> 1.083x; unshaped loopback unchanged (0.95-1.03 GB/s
  -> 1.03-1.05). 128 KiB is 10 ms at 100 Mbit/s, 1 ms at 1 Gbit/s.
- `UCX_RNDV_SCHEME=put_zcopy` (same condition) for rendezvous a user turns back on
  (`UCX_RNDV_THRESH`): over TCP the automatic choice ran at 1.1-1.7 GB/s on loopback,
  put_zcopy at 2.5-4.3 GB/s (8-64 MiB messages, same runs).
- `UCX_WARN_UNUSED_ENV_VARS=n`: UCX otherwise warns about every UCX_* variable the
  chosen transports ignore, which is noise in worker logs.
- `UCX_TCP_CM_REUSEADDR=y`: a worker restarted on its fixed port must not fail with
  "Device is busy" while the previous socket lingers in TIME_WAIT.

ucxx's progress thread waits on the UCX worker's event fd with a timeout that ucxx fixes
at 1 ms, so an idle process woke 1,000 times a second: 3.3 % of a core each, here, doing
nothing; 16 of them on a 2-core host are a quarter of its CPU. UCX wakes the thread on
every event it has (socket readiness, requests posted from Python), so the timeout is
only a backstop: `PROGRESS_WAKE_MS` (50; `CASCADE_UCX_PROGRESS_WAKE_MS` overrides) makes
the idle cost 0.1 %. `cascade bench multicast`, 1 -> 15: bench/README.md, issue 15.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import weakref
from collections.abc import Mapping, MutableMapping
from types import ModuleType
from typing import Any

from cascade_worker.transport import notifier

UCX_DEFAULTS: dict[str, str] = {
    "UCX_TLS": "tcp,self",
    "UCX_WARN_UNUSED_ENV_VARS": "n",
    "UCX_TCP_CM_REUSEADDR": "y",
}
# Largest message sent eagerly over our TCP default; the multicast's chunk default.
EAGER_MAX_BYTES = 512 * 1024
# Applied only when UCX_TLS is ours (the user did not choose transports).
TCP_DEFAULTS: dict[str, str] = {
    "UCX_RNDV_THRESH": str(EAGER_MAX_BYTES + 1),
    "UCX_RNDV_SCHEME": "put_zcopy",
    "UCX_TCP_SNDBUF": str(128 * 1024),
}


# The progress thread's epoll timeout (module docstring); ucxx's own is 1 ms.
PROGRESS_WAKE_MS = 50
PROGRESS_WAKE_ENV = "CASCADE_UCX_PROGRESS_WAKE_MS"


def progress_wake_ms(environ: Mapping[str, str] | None = None) -> int:
    """The progress thread's epoll timeout: PROGRESS_WAKE_MS unless the env sets one."""
    raw = (os.environ if environ is None else environ).get(PROGRESS_WAKE_ENV)
    if raw is None:
        return PROGRESS_WAKE_MS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{PROGRESS_WAKE_ENV}={raw!r} is not a whole number of ms >= 1")
    return value


def configure_ucx_env(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Fill in UCX defaults the user did not set; returns the variables it set."""
    env = os.environ if environ is None else environ
    defaults = dict(UCX_DEFAULTS)
    if "UCX_TLS" not in env:
        defaults |= TCP_DEFAULTS
    applied: dict[str, str] = {}
    for key, value in defaults.items():
        if key not in env:
            env[key] = value
            applied[key] = value
    return applied


def ucx() -> ModuleType:
    """The ucxx module, imported after the defaults are in place."""
    configure_ucx_env()
    import ucxx

    _wake_progress_less(progress_wake_ms())
    notifier.install()

    # ucxx's progress thread imports cuda.core as it starts (its CUDA-context hook), in C
    # code that holds the GIL for 0.2-0.5 s: a fresh worker's event loop stalled there
    # while its first plan connected. Importing it here puts that cost in the preload.
    with contextlib.suppress(ImportError):
        importlib.import_module("cuda.core")
    module: ModuleType = ucxx
    return module


def _wake_progress_less(timeout_ms: int) -> None:
    """Start ucxx's progress threads with `timeout_ms` instead of its 1 ms (module
    docstring). ucxx picks the class from its application_context module when a loop
    first needs progress, so replacing it there covers every later context."""
    from ucxx._lib_async import application_context
    from ucxx._lib_async import continuous_ucx_progress as progress

    if getattr(application_context.ThreadMode, "wake_ms", None) == timeout_ms:
        return
    base = progress.ThreadMode  # ucxx's own (only application_context's name is replaced)

    class ThreadMode(base):  # type: ignore[misc, valid-type]
        def __init__(self, worker: Any, event_loop: Any, polling_mode: bool = False) -> None:
            progress.ProgressTask.__init__(self, worker, event_loop)
            worker.set_progress_thread_start_callback(progress._create_context)
            worker.start_progress_thread(polling_mode=polling_mode, epoll_timeout=timeout_ms)
            weakref.finalize(self, worker.stop_progress_thread)

    ThreadMode.wake_ms = timeout_ms
    application_context.ThreadMode = ThreadMode


def use_notifier_thread() -> None:
    """For a process that runs all its UCX traffic on one event loop: ucxx's notifier
    thread wakes that loop instead of every request spinning on it (the spin cost
    55-82 CPU-s per GB moved on 2 cores). Call before ucxx is imported; pair with
    `stop_notifier` on the way out. Library users with several loops (the in-process
    tests) keep the default."""
    os.environ.setdefault("UCXPY_ENABLE_PYTHON_FUTURE", "1")


def stop_notifier() -> None:
    """ucxx's notifier thread is not a daemon: without this the process never exits."""
    if "ucxx" in sys.modules:
        with contextlib.suppress(Exception):
            sys.modules["ucxx"].stop_notifier_thread()
