"""Model weights as packed, checksummed blocks of consecutive layers (see store.py)."""

from cascade_worker.blocks.manifest import BlockManifest, ModelManifest, TensorEntry
from cascade_worker.blocks.pack import PackedModel, pack_model, unpack_block
from cascade_worker.blocks.partition import partition_layers
from cascade_worker.blocks.store import BlockStore

__all__ = [
    "BlockManifest",
    "BlockStore",
    "ModelManifest",
    "PackedModel",
    "TensorEntry",
    "pack_model",
    "partition_layers",
    "unpack_block",
]
