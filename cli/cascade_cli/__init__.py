"""cascade_cli."""
