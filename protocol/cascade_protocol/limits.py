"""Upper bounds on every message field that sizes an allocation, defined once.

A peer, a client or a fuzzer can put any integer into a JSON field; the receiver must
refuse what no real request needs before it allocates for it (a list of that length,
a KV cache of that many blocks, a buffer of that many bytes). These are the static
ceilings both ends validate against (pydantic `Field` bounds in the shared models);
limits that depend on the model or the worker (its context length, its KV cache) are
checked at run time where they are known, against these as the outer bound.
"""

from __future__ import annotations

# Longest context any engine runs: the ModelDeployment's engine.maxModelLen bound
# (cascade_api.modeldeployment.EngineOptions). Bounds max_tokens, prompt token lists
# and resumed tokens, which all fit in one context.
MAX_CONTEXT_TOKENS = 1_048_576
# Largest running batch: the ModelDeployment's engine.maxBatchSize bound. Bounds the
# sequences of one pipeline micro-batch and a serve order's max batch.
MAX_BATCH = 4096
# Most blocks a model is cut into: the ModelDeployment's multicast.blocks bound (and a
# block holds at least one layer, so also the most layers a range may name).
MAX_MODEL_BLOCKS = 4096
MAX_LAYERS = MAX_MODEL_BLOCKS

# A text prompt or chat message content, in characters: a BPE token averages about four
# characters of text, so twice that per token of the longest context is generous (and
# the HTTP servers' 1 MiB body limit is tighter still).
MAX_PROMPT_CHARS = 8 * MAX_CONTEXT_TOKENS
MAX_CHAT_MESSAGES = 4096
MAX_ROLE_CHARS = 64
# OpenAI allows 4 stop strings; 16 leaves room. The text stream holds back up to the
# longest stop string's length, so that is bounded too.
# top_k beyond any vocabulary is "keep all"; the bound only keeps the field an int32.
MAX_TOP_K = 2**31 - 1
MAX_STOP_STRINGS = 16
MAX_STOP_CHARS = 1024
MAX_STOP_TOKEN_IDS = 256
# Token ids are vocabulary indices: int32 covers every vocabulary (the engine checks the
# model's own size); larger values would overflow a tensor before that check.
MAX_TOKEN_ID = 2**31 - 1
# torch.Generator.manual_seed takes [-2**63, 2**64 - 1]; anything else raised in the engine.
MIN_SEED = -(2**63)
MAX_SEED = 2**64 - 1
MAX_REQUEST_ID_CHARS = 256
# Pod names and addresses ("host:port"), as Kubernetes bounds a DNS subdomain.
MAX_NAME_CHARS = 253
# Pods one plan names (sources and targets): far beyond any deployment's replicas.
MAX_PLAN_PODS = 4096
# The longest a drain may be asked to wait for in-flight requests, seconds.
MAX_DRAIN_SECONDS = 3600.0
