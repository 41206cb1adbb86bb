"""The worker's control API: the jobs that move weights (load, transfer, fetch), what the
worker holds and is doing, how it refuses, and the host-copy role that only holds blocks."""
