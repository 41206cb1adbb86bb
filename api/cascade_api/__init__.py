"""cascade_api."""
