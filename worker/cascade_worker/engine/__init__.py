"""The inference engine: any contiguous layer range of a model, continuous batching.

core.py       the EngineCore protocol the serving layer drives, and what it reports
options.py    EngineOptions: what a serve request or the worker's flags ask of the engine
device.py     where the engine computes: the pod's ask, its GPUs and what torch finds
engine.py     LLMEngine (EngineCore): tokenize, validate, schedule, execute, sample, stream
scheduler.py  continuous batching decisions (pure): classes, max_batch, budget, preemption
kv_blocks.py  paged KV capacity: block allocator and tables (pure)
executor.py   Executor protocol; LocalExecutor chains in-process stages
stage.py      StageModel: layers [start, end) with their own paged KV cache
batch.py      StageBatch: one step's tokens/hidden states + ints, the stage boundary
layers.py     RMSNorm, RoPE, masked GQA attention, SwiGLU (plain torch)
weights.py    gather a stage's tensors from a BlockStore, cast for compute
kv_cache.py   a stage's K/V tensors
sizing.py     context length; KV-cache size from a memory budget (KvSizing, JSON)
kv_profile.py measure the worst step's memory peak, size the KV cache (profile_kv)
startup.py    a one-process engine's start-up: load, size (or restore), compile
compiled.py   torch.compile of a layer range: token buckets, attention as a custom op
config.py     ModelConfig from HF config.json
sampling.py   greedy / temperature / top-k / top-p, batched on the device, seeded per request
tokenizer.py  tokenizers-based encode, chat templates, incremental detokenizing
output.py     streamed text with stop strings held back and cut
requests.py   per-request state and stop rules

Importing this package (or core.py, options.py, device.py) does not import torch.
"""
