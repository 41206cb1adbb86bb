"""`cascade bench engine`: the engine eager vs compiled vs transformers, one process."""
