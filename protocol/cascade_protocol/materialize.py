"""Materialized start-up state (Medusa): what a profile Job records once so that every
later cold start restores it instead of measuring again, and how a worker reports it.

Why a key: the recorded state is only true for the exact start that measured it. A KV
sizing depends on the weights, the accelerator, the dtype and the engine's limits; a
compiler cache also on the torch build. `MaterializationKey` lists all of them and its
`id` (a hash of the canonical key) names the artifact: `<model dir>/.materialized/<id>.json`
beside the weights, and the same document travels with the manifest in a multicast.
A worker restores a document only when its key equals the key it computes for itself;
any other document is refused (status `refused`, and the operator turns the reason into
an Event) and the worker takes the cold path.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from cascade_api.materialization import MaterializationState

__all__ = [
    "ARTIFACT_DIR",
    "MaterializationInfo",
    "MaterializationKey",
    "MaterializationState",
    "MaterializedState",
]

# Artifacts live in this directory inside the model's directory (the weights' storage).
ARTIFACT_DIR = ".materialized"


class _Doc(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class MaterializationKey(_Doc):
    """Everything the recorded state depends on; two starts with equal keys may share it."""

    model_digest: str
    accelerator: str  # "cpu", or the GPU's product name (torch.cuda.get_device_name)
    dtype: str  # the compute dtype the engine runs ("float32", "bfloat16")
    max_batch: int
    max_model_len: int
    prefill_budget: int
    block_size: int
    memory_budget_bytes: int | None = None  # None: the engine's default budget
    gpu_memory_utilization: float
    compile: bool
    runtime: str  # torch's version and the engine's artifact format

    @property
    def id(self) -> str:
        """Content address of the key: sha256 of its canonical JSON, 32 hex digits."""
        doc = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(doc.encode()).hexdigest()[:32]

    def differences(self, other: MaterializationKey) -> list[str]:
        """'field: mine != theirs' for each field that differs (why one is refused)."""
        mine, theirs = self.model_dump(), other.model_dump()
        return [f"{k}: {theirs[k]!r} != {mine[k]!r}" for k in mine if mine[k] != theirs[k]]


class MaterializedState(_Doc):
    """One artifact: the key it was recorded for and what the profile run produced."""

    id: str  # MaterializationKey.id of `key` when written; checked on every read
    key: MaterializationKey
    kv_sizing: dict[str, Any]  # engine.sizing.KvSizing.to_json()
    # torch.compiler.save_cache_artifacts() bytes, base64; None when compile is off.
    compile_cache: str | None = None
    compile_cache_sha256: str | None = None
    # What the profile run spent on the work a restore skips (KV profiling, compile).
    profile_s: float = Field(ge=0)
    created_at: float  # wall clock, epoch seconds
    created_by: str = ""  # the pod that profiled

    def problem(self, expected: MaterializationKey) -> str | None:
        """Why this document must not be used by a start whose key is `expected`."""
        if self.id != self.key.id:
            return f"artifact {self.id} holds key {self.key.id} (stale or altered)"
        if self.key != expected:
            diffs = "; ".join(expected.differences(self.key))
            return f"artifact {self.id} was recorded for another start ({diffs})"
        if self.compile_cache is not None:
            digest = hashlib.sha256(self.compile_cache.encode()).hexdigest()
            if digest != self.compile_cache_sha256:
                return f"artifact {self.id}: compile cache checksum mismatch"
        return None


class MaterializationInfo(BaseModel):
    """WorkerStatus.materialization: the key this start computed and what it did
    (unknown fields ignored, like the rest of the status: rolling upgrades)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    key: str  # MaterializationKey.id this start needed
    state: MaterializationState
    artifact: str | None = None  # id of the artifact restored or refused
    reason: str | None = None  # why refused
    # Seconds a restore saved: the artifact's profile_s minus this start's restore time.
    saved_s: float | None = None
    # The two measurements saved_s is the difference of (a restore only): what the
    # profile run spent on the restorable work, and what this start spent restoring it
    # (reading and checking the artifact, applying the KV sizing, loading the compile).
    profile_s: float | None = None
    restore_s: float | None = None
