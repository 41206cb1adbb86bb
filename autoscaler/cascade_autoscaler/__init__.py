"""Cascade's autoscaling policy: pure functions and small state machines, no I/O.

Chiron's hierarchical backpressure (../shared/seeds/chiron.txt) under Kubernetes HPA
`behavior` semantics. The worker runs the local batch-size controller; the operator runs
the global policy and writes `spec.replicas`. Everything here takes `now` and the
observations as arguments, so it is tested tick by tick and replayed by `cascade
simulate` (cascade_sim). Callers: cascade_worker.serving.local_autoscaler (batch_size),
cascade_operator.autoscale (policy).
"""
