"""`cascade bench autoscale`: Cascade's autoscaler against fixed and KPA baselines on a
real (local) cluster, with the simulator's prediction beside it (issue 10 §7).

`workload` scales a trace window from a capacity profile so its busiest minute needs
maxReplicas instances at a stated utilization; `manifest` makes each run's
ModelDeployment (Cascade, fixed at max, KPA, fixed at min); `kpa` is the baseline's
pure decision; `timeline` turns per-second samples into instance-seconds, scaling
events and times to ready; `compare` makes a run's row and judges the goals; `predict`
runs `cascade_sim` on the same arrivals; `document` and `report` make the JSON, the
table and the PNG. The I/O is in `cluster` (dev cluster, namespace, operator, pods,
/scale), `loops` (sampler and KPA threads beside the replay) and `run`.
"""
