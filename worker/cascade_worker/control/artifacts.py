"""Materialized start-up state on the worker: read and write artifacts beside the
weights, choose the one a start may restore, and the profile Job's one run.

Artifacts are offered to a start from wherever its weights came from: files in the
model's `.materialized/` directory (a load from storage) or the multicast's manifest
frame (a transfer from a source, host copies included). They ride on the `BlockStore`
(`store.materialized`) so a worker that sends its blocks sends them too. `choose` takes
the offered artifact whose key is this start's, and refuses the others with a reason
(reported in status; the operator turns it into an Event): a refused artifact is never
used, the start profiles as if none were offered.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from cascade_protocol.materialize import (
    ARTIFACT_DIR,
    MaterializationInfo,
    MaterializationKey,
    MaterializationState,
    MaterializedState,
)

if TYPE_CHECKING:
    from cascade_worker.blocks.store import BlockStore
    from cascade_worker.engine.options import EngineOptions
    from cascade_worker.engine.startup import StartupReport

log = logging.getLogger(__name__)

# A compile cache is a few MB; a file much larger than that is not ours.
MAX_ARTIFACT_BYTES = 256 << 20


def artifact_dir(model_dir: str | Path) -> Path:
    return Path(model_dir) / ARTIFACT_DIR


def read_artifacts(model_dir: str | Path) -> list[MaterializedState]:
    """Every readable artifact beside the weights; unreadable files are logged and skipped
    (a torn or foreign file is no artifact; its key cannot even be read)."""
    found: list[MaterializedState] = []
    folder = artifact_dir(model_dir)
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            if path.stat().st_size > MAX_ARTIFACT_BYTES:
                raise ValueError(f"larger than {MAX_ARTIFACT_BYTES} bytes")
            found.append(MaterializedState.model_validate_json(path.read_bytes()))
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("ignoring materialized artifact %s: %s", path, str(exc)[:300])
    return found


def write_artifact(model_dir: str | Path, state: MaterializedState) -> Path:
    """Write `state` as `<model dir>/.materialized/<id>.json` atomically (a reader never
    sees half a file): temp file in the same directory, fsync, rename."""
    folder = artifact_dir(model_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{state.id}.json"
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(state.model_dump_json(by_alias=True).encode())
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def offer_stored(store: BlockStore, model_dir: str | Path) -> None:
    """Add the artifacts recorded in storage since `store` was filled (a profile Job that
    ended after this worker loaded, or a host copy filled from a peer) to what it sends:
    a source reads the small artifact files, its targets get them in the manifest frame."""
    have = {s.id for s in store.materialized}
    new = [s for s in read_artifacts(model_dir) if s.id not in have]
    store.materialized = [*store.materialized, *new]


def choose(
    offered: list[MaterializedState], expected: MaterializationKey
) -> tuple[MaterializedState | None, MaterializationInfo]:
    """The artifact this start restores (None: profile), and what status says of it.

    An artifact filed under this start's key id is checked in full (`problem`: its key
    must hash to its id and equal `expected`); failing that, or when only artifacts of
    other keys are offered, the start is refused them and takes the cold path."""
    key = expected.id
    mine = [s for s in offered if s.id == key]
    for state in mine:
        problem = state.problem(expected)
        if problem is None:
            return state, MaterializationInfo(
                key=key, state=MaterializationState.RESTORED, artifact=state.id
            )
    refused = mine[0] if mine else (offered[0] if offered else None)
    if refused is None:
        return None, MaterializationInfo(key=key, state=MaterializationState.PROFILED)
    reason = refused.problem(expected) or "no artifact for this key"
    return None, MaterializationInfo(
        key=key, state=MaterializationState.REFUSED, artifact=refused.id, reason=reason
    )


def restore_seconds(read_s: float, startup: StartupReport) -> float:
    """What a restore spent, measured: reading and checking the artifact (`read_s`,
    before the build) and the build's restorable work done from it (engine/startup.py)."""
    return round(read_s + startup.restorable_s, 6)


def saved(state: MaterializedState | None, restore_s: float) -> float | None:
    """Seconds a restore saved: the profile run's measured cost minus this start's
    measured restore (`restore_seconds`); None without an artifact."""
    if state is None:
        return None
    return round(state.profile_s - restore_s, 4)


def profile_once(model_dir: str, blocks: int, options: EngineOptions, pod: str) -> Path:
    """The profile Job's run: pack the model from storage, start an engine the way a
    serving worker with these options would (profiling its KV cache, compiling when
    asked), and write what it measured beside the weights. Returns the artifact's path."""
    from cascade_worker.blocks.store import BlockStore
    from cascade_worker.engine import cpu_limit
    from cascade_worker.engine.engine import LLMEngine
    from cascade_worker.engine.materialize import capture, start_key

    cpu_limit.apply()
    began = time.monotonic()
    store = BlockStore.from_model_dir(Path(model_dir), blocks)
    kwargs = options.engine_kwargs()
    key = start_key(store, **kwargs)
    engine = LLMEngine.from_store(store, **kwargs)
    state = capture(key, engine.startup, by=pod)
    path = write_artifact(model_dir, state)
    doc = {"key": key.id, "profileSeconds": state.profile_s, "path": str(path)}
    log.info("materialized %s in %.1f s", json.dumps(doc), time.monotonic() - began)
    return path
