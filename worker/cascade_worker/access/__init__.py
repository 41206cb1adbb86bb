"""Who may call the worker: the deployment's tokens on HTTP (http_auth.py), the peer key
its UCX connections prove (peer_key.py), and the refusals counted for /metrics
(refusals.py). Beside the worker's layers: any of them may use it."""
