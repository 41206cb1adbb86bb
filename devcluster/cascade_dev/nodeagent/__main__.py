"""`python -m cascade_dev.nodeagent --state-dir DIR`: run the node agent in the foreground.

`cascade dev up` starts it detached with its log in DIR/logs/; SIGTERM/SIGINT stop the
agent but leave pods running (a restarted agent re-adopts them).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType


def _default_state_dir() -> Path:
    env = os.environ.get("CASCADE_DEV_DIR")
    return Path(env).expanduser() if env else Path.home() / ".local" / "state" / "cascade" / "dev"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cascade_dev.nodeagent", description=__doc__)
    parser.add_argument("--state-dir", type=Path, default=_default_state_dir())
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="admin kubeconfig (default: STATE_DIR/kubeconfig)",
    )
    parser.add_argument("--log-level", default=os.environ.get("CASCADE_NODEAGENT_LOG", "INFO"))
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s",
    )
    logging.getLogger("urllib3").setLevel(logging.ERROR)

    from cascade_dev.fabric import Fabric

    from .agent import Agent

    state_dir = args.state_dir.resolve()
    agent = Agent(state_dir, args.kubeconfig or state_dir / "kubeconfig", Fabric.load(state_dir))

    def _stop(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger(__name__).info("signal %d: stopping (pods keep running)", signum)
        agent.stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    agent.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
