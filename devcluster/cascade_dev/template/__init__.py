"""A warm worker template: worker processes forked from one that has already imported.

On a GPU cluster each node starts its pods on its own cores, so five pods starting on
five nodes cost one pod's start in wall time. The dev cluster's nodes share the host's
two cores, and a worker's start is mostly imports (torch, ucxx, the engine: ~2.6 CPU-s
of its ~4): five at once took 11-16 s under load. The node agent therefore keeps one
template process that imported the worker once, and forks each worker container from it
(`server`), inside the pod's network and mount namespaces (`namespaces`), as `ip netns
exec` + the mount wrapper would put an exec'd one. The agent's side is
`cascade_dev.nodeagent.templated`; `messages` is what crosses between them.

This is the dev cluster's stand-in for per-node CPU at start-up, not something Cascade
does on a real cluster (there each container imports on its own node).
"""
