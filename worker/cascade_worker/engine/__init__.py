"""The inference engine: any contiguous layer range of a model, continuous batching."""
