"""cascade_worker."""
