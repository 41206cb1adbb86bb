"""Messages that cross processes, defined once: the ground the worker, the gateway and
the operator stand on.

Each module holds one conversation: `generate` (gateway -> worker inference), `load`
(the worker's load report, polled by the gateway and read by the autoscaler),
`gateway_load` (the gateway's report to the operator's autoscaler), `roles` (instance
roles the autoscaler assigns and the gateway routes by), `status`
(the worker's GET /v1/status, read by the operator), `control` (the operator's and
peers' orders to a worker's control API), `service` (the small HTTP server every pod
process runs) and `cli_args` (the flags every pod process shares). Pydantic only for
messages; no torch, numpy, ucxx or cluster clients, so the gateway and operator images
install none of them. Import the module you need; this package imports nothing.
"""
