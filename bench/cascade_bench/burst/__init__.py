"""`cascade bench burst`: one burst, five ways to meet it (issue 11's benchmark).

One instance serves a steady warm-up; the trace's busiest window arrives, its rate
scaled from the capacity profile to a multiple of one instance's capacity; at its start
the deployment scales 1 -> N. The same load runs, one mode after another, each in a
fresh namespace with its own operator: stop-the-world, execute-while-load pipelines,
pipelines with cooperative execution, all-cached (new instances load from their own
disk) and pre-scaled (N instances before the burst).

`workload` picks and scales the windows; `modes` makes each mode's ModelDeployment;
`timeline` turns the probe's rounds (worker statuses and token counters, the gateway's
queue, the ScalePlans) and the request records into series and events; `metrics` makes
each mode's row, the comparisons and the goals; `report` the document and the table,
`plot` the PNG. The I/O is in `probes` (the half-second probe) and `run`.
"""
