"""The operator's I/O layer: the only code that talks to other processes.

kube.py     the Kubernetes API server (the only importer of `kubernetes`)
workers.py  workers' control APIs (GET /v1/status, orders)
"""
