"""Which materialized start-up state an engine start restores, and what that saved.

Only a one-process engine restores (`Serving.start`): a pipeline head's KV cache is
still sized by the fixed formula and its stages compile nothing, so there is nothing
recorded to give them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cascade_protocol.materialize import MaterializationInfo, MaterializedState
from cascade_worker.control.artifacts import choose, restore_seconds, saved
from cascade_worker.engine.core import EngineCore
from cascade_worker.engine.options import EngineOptions
from cascade_worker.serving.factory import EngineFactory

if TYPE_CHECKING:
    from cascade_worker.blocks.store import BlockStore


@dataclass
class Restore:
    state: MaterializedState | None  # the artifact restored; None: this start profiles
    info: MaterializationInfo  # what status says
    # Seconds spent choosing (key and checksums checked) and decoding the artifact,
    # before the build: part of the restore, so part of the KV sizing stage and of
    # what saved_s subtracts.
    read_s: float = 0.0

    def apply(self, options: EngineOptions) -> EngineOptions:
        """`options` with the artifact's recorded state (unchanged without one)."""
        if self.state is None:
            return options
        from cascade_worker.engine.materialize import restore_options

        began = time.perf_counter()
        restored = restore_options(self.state)
        self.read_s += time.perf_counter() - began
        return replace(options, **restored)

    def finish(self, core: object) -> None:
        """The engine is built: what the restore cost and saved, both measured."""
        from cascade_worker.engine.startup import StartupReport

        startup = getattr(core, "startup", None)  # a test's fake engine has none
        if self.state is not None and isinstance(startup, StartupReport):
            spent = restore_seconds(self.read_s, startup)
            self.info = self.info.model_copy(
                update={
                    "profile_s": self.state.profile_s,
                    "restore_s": spent,
                    "saved_s": saved(self.state, spent),
                }
            )


def plan_restore(store: BlockStore, options: EngineOptions, enabled: bool) -> Restore | None:
    """The restore of a start with `options` over `store` (None: materialization off)."""
    if not enabled:
        return None
    from cascade_worker.engine.materialize import start_key

    began = time.perf_counter()
    state, info = choose(store.materialized, start_key(store, **options.engine_kwargs()))
    return Restore(state, info, read_s=time.perf_counter() - began)


def restoring(
    factory: EngineFactory, store: BlockStore, options: EngineOptions, enabled: bool
) -> tuple[Restore | None, Callable[[], tuple[EngineCore, None]]]:
    """The restore (None: off) and the build (on a worker thread) of a one-process start."""
    restore = plan_restore(store, options, enabled)
    chosen = restore.apply(options) if restore is not None else options

    def build() -> tuple[EngineCore, None]:
        core = factory(store, chosen)
        if restore is not None:
            restore.finish(core)
        return core, None

    return restore, build
