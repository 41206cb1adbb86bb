"""Node agent for the local cluster: plays kubelet for N simulated GPU nodes.

`python -m cascade_dev.nodeagent --state-dir DIR` registers every node listed in
DIR/cluster.json, keeps them Ready with Leases, and runs each pod bound to them as local
processes (one process group per container) inside the pod's network namespace from
`cascade_dev.fabric`. Pure logic (node manifests, image mapping, env, status, back-off,
probe counting) lives in small modules apart from the I/O (API client, processes).
"""
