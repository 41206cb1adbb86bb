"""Which materialized start-up state an engine start restores, and what that saved.

Only a one-process engine restores (`Serving.start`): a pipeline head's KV cache is
still sized by the fixed formula and its stages compile nothing, so there is nothing
recorded to give them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cascade_protocol.materialize import MaterializationInfo, MaterializedState
from cascade_worker.engine.protocol import EngineCore
from cascade_worker.materialized import choose, saved
from cascade_worker.serving.factory import EngineFactory, EngineOptions

if TYPE_CHECKING:
    from cascade_worker.blocks.store import BlockStore


@dataclass
class Restore:
    state: MaterializedState | None  # the artifact restored; None: this start profiles
    info: MaterializationInfo  # what status says

    def apply(self, options: EngineOptions) -> EngineOptions:
        """`options` with the artifact's recorded state (unchanged without one)."""
        if self.state is None:
            return options
        from cascade_worker.engine.materialize import restore_options

        return replace(options, **restore_options(self.state))

    def finish(self, core: object) -> None:
        """The engine is built: how many seconds the restore saved."""
        from cascade_worker.engine.startup import StartupReport

        startup = getattr(core, "startup", None)  # a test's fake engine has none
        if self.state is not None and isinstance(startup, StartupReport):
            self.info = self.info.model_copy(update={"saved_s": saved(self.state, startup)})


def plan_restore(store: BlockStore, options: EngineOptions, enabled: bool) -> Restore | None:
    """The restore of a start with `options` over `store` (None: materialization off)."""
    if not enabled:
        return None
    from cascade_worker.engine.materialize import start_key

    state, info = choose(store.materialized, start_key(store, **options.engine_kwargs()))
    return Restore(state, info)


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
