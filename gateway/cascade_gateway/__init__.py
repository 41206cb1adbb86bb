"""cascade_gateway."""
