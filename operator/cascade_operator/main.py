"""`cascade-operator`: run the kopf operator (standalone: one replica, Recreate)."""

from __future__ import annotations

import argparse
import logging

import kopf

from cascade_operator import handlers  # registers the handlers
from cascade_operator.metrics import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Cascade operator")
    parser.add_argument("--namespace", "-n", action="append", default=[], help="watch only these")
    parser.add_argument("--all-namespaces", "-A", action="store_true", help="watch all (default)")
    parser.add_argument("--liveness-port", type=int, default=8080, help="0 disables /healthz")
    parser.add_argument(
        "--metrics-port", type=int, default=8081, help="Prometheus /metrics; 0 disables"
    )
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args(argv)
    level = logging.DEBUG if args.verbose else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # one line per handled watch event is noise; our events tell the story
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    liveness = f"http://0.0.0.0:{args.liveness_port}/healthz" if args.liveness_port else None
    namespaces = [] if args.all_namespaces else args.namespace
    if args.metrics_port:
        serve(handlers.METRICS.registry, args.metrics_port)
    kopf.run(
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=liveness,
    )


if __name__ == "__main__":
    main()
