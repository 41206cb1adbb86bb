"""`cascade bench capacity`: one instance's serving capacity under its node's CPU quota.

`stats` turns per-request chunk arrival times into a curve point (tokens/s and per-token
inter-token latency over a fixed window) and the 1-vs-2 scaling ratio; `report` prints
the table and draws the PNG; `load` keeps exactly b requests in flight against workers'
`/v1/generate`; `cluster` deploys the model and finds its workers; `run` ties them up.
Only `stats` and `report` are pure (unit-tested); the rest does I/O.
"""
