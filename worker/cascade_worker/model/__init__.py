"""Locally made model checkpoints (random weights, local tokenizer); no hub downloads.

Modules: spec (pure shapes/config/sizing), tokenizer, corpus, checkpoint (writes files).
Nothing is imported here so the CLI can read `spec` without loading torch.
"""
