"""Model checkpoints on disk: made here (random weights and a local tokenizer, for tests
and benches) or imported from a GGUF file (a real model); no hub downloads.

Modules: spec (pure shapes/config/sizing), tokenizer, corpus, checkpoint (writes random
ones), files (what a checkpoint directory holds), gguf_import and gguf_tokenizer (a GGUF
into the same layout). Nothing is imported here so the CLI can read `spec` without
loading torch.
"""
