"""A trace-driven discrete-event simulator of a Cascade deployment (`cascade simulate`).

It runs the *same* pure policies as the cluster (`cascade_autoscaler`: the global
policy with HPA behavior, and each instance's local batch-size controller) over a model
of what they control, so Θ, δ and `behavior` can be tuned, and the policies checked, at
scales and durations a test cluster cannot reach:

- `workload`: requests from a trace (built by the CLI with the replay's own scaling);
- `profile`: one instance's speed vs batch size (`cascade bench capacity`);
- `instance`: a fluid model of continuous batching with chunked prefill, event-driven;
- `local`: the local autoscaler's window and tick, as the worker runs it;
- `gateway`: class queues, strict priority, role routing;
- `pool`: starting, ready, draining instances, roles, instance-seconds;
- `view`, `policies`: what a global policy sees, and the policies (Cascade, baselines);
- `sim`: the event loop; `metrics`: SLO attainment and cost, as the replay reports them.

Pure: no I/O, no clock; the CLI (cascade_cli.simulate) reads files and draws.
"""
