"""cascade_operator."""
