"""The Cascade autoscaler in the operator: observe (pure), assign roles (pure), tick (I/O).

The policy itself is `cascade_autoscaler` (pure, no cluster); this package only turns
what the API and the gateway say into its context and acts on its recommendation.
"""
