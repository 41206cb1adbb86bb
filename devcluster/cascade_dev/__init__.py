"""cascade_dev."""
